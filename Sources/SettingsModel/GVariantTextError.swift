// SPDX-License-Identifier: Apache-2.0

/// An error in GVariant text: where it is, what kind it is, and what is wrong.
///
/// ```swift
/// do {
///     _ = try GVariantText.parse("uint32 -1")
/// } catch {
///     print(error)   // byte 7: number -1 is out of range for type 'u' (uint32: 0…4294967295)
/// }
/// ```
public struct GVariantTextError: Error, Sendable, Hashable {
    /// What kind of problem the text has.
    public let code: Code
    /// The offset, in UTF-8 bytes from the start of the text, of the token where the problem was found.
    public let offset: Int
    /// A message for people, saying what is wrong and, where possible, what to write instead.
    public let message: String

    /// Makes an error.
    ///
    /// - Parameters:
    ///   - code: The kind of problem.
    ///   - offset: The UTF-8 byte offset of the offending token.
    ///   - message: What is wrong.
    public init(_ code: Code, at offset: Int, _ message: String) {
        self.code = code
        self.offset = offset
        self.message = message
    }

    /// Turns the error into the ``SettingsError`` a broker answers when a key's new value is bad text.
    ///
    /// A type mismatch becomes ``SettingsError/Code/typeMismatch``, a number out of range
    /// ``SettingsError/Code/outOfRange``, nesting too deep ``SettingsError/Code/tooLarge``, anything else
    /// ``SettingsError/Code/invalidValue``.
    ///
    /// - Parameter key: The key whose value the text was meant to be, named in the message.
    public func settingsError(for key: SettingPath) -> SettingsError {
        let text = "invalid value for \(key): byte \(offset): \(message)"
        switch code {
        case .typeMismatch: return .typeMismatch(text)
        case .outOfRange: return .outOfRange(text)
        case .tooDeep: return .tooLarge(text)
        default: return .invalidValue(text)
        }
    }

    /// A kind of problem in GVariant text.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) { self.name = name }

        /// The text is not well formed: an unexpected token, an unterminated string, a bad escape or number.
        public static let syntax = Code("syntax")
        /// The value does not have the type asked for, or elements of an array have no common type.
        public static let typeMismatch = Code("typeMismatch")
        /// A number does not fit its type, or is too big for any type.
        public static let outOfRange = Code("outOfRange")
        /// The type of the value cannot be inferred (an empty array or dictionary with no annotation).
        public static let cannotInferType = Code("cannotInferType")
        /// The text uses a GVariant feature that D-Bus has no type for: maybe types, empty tuples, handles,
        /// dictionary entries outside arrays.
        public static let unsupported = Code("unsupported")
        /// Containers nest deeper than the parser or D-Bus allows.
        public static let tooDeep = Code("tooDeep")
        /// The value breaks a D-Bus rule, such as an invalid object path or signature.
        public static let invalidValue = Code("invalidValue")

        /// The name of the code, such as `typeMismatch`.
        public var description: String { name }
    }
}

// MARK: - CustomStringConvertible

extension GVariantTextError: CustomStringConvertible {
    /// The offset and the message, as in `byte 7: number -1 is out of range for type 'u'`.
    public var description: String { "byte \(offset): \(message)" }
}
