// SPDX-License-Identifier: Apache-2.0

/// A D-Bus error name such as `io.github.settingsbus.Settings1.Error.UnknownKey`.
///
/// Valid: `org.freedesktop.DBus.Error.Failed`. Invalid: `Failed`, `org..Error`.
///
/// The throwing initialiser checks the grammar of the D-Bus specification, so a `ErrorName` can always be handed
/// to libdbus. A string literal that breaks the grammar is a programmer error and traps.
public struct ErrorName: Sendable, Hashable, Comparable {
    /// The name text.
    public let rawValue: String

    /// Validates and wraps a name.
    ///
    /// - Throws: `DBusError` named `org.freedesktop.DBus.Error.InvalidArgs`, saying which rule is broken.
    public init(_ text: String) throws(DBusError) {
        try NameValidation.check(text, as: .errorName)
        rawValue = text
    }

    /// Orders names by their text.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

// MARK: - ExpressibleByStringLiteral

extension ErrorName: ExpressibleByStringLiteral {
    /// Makes a name from a literal that is known to be valid; an invalid literal traps.
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("invalid literal: \(error.message)") }
    }
}

// MARK: - CustomStringConvertible

extension ErrorName: CustomStringConvertible {
    public var description: String { rawValue }
}
