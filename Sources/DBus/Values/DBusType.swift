// SPDX-License-Identifier: Apache-2.0

/// A single complete D-Bus type, such as `s`, `a{sv}` or `(iis)`.
///
/// Every type of the D-Bus specification is modelled except `h` (unix file descriptors), which SettingsBus
/// never carries. A `DBusType` is always well formed: build one by hand from its cases, or parse one from
/// text with ``Signature``.
public indirect enum DBusType: Sendable, Hashable {
    case byte
    case boolean
    case int16
    case uint16
    case int32
    case uint32
    case int64
    case uint64
    case double
    case string
    case objectPath
    case signature
    case variant
    /// An array of elements of one type (`aT`).
    case array(DBusType)
    /// An array of dictionary entries (`a{KV}`); the key is a basic type.
    case dictionary(key: DBusType, value: DBusType)
    /// A structure of one or more fields (`(T…)`).
    case structure([DBusType])

    /// Whether the type is basic (may be a dictionary key): every fixed type, strings, paths and signatures.
    public var isBasic: Bool {
        switch self {
        case .variant, .array, .dictionary, .structure: return false
        default: return true
        }
    }

    /// The type in signature text, for example `a{sv}`.
    public var signatureText: String {
        var text = ""
        appendSignature(to: &text)
        return text
    }

    func appendSignature(to text: inout String) {
        switch self {
        case .byte: text += "y"
        case .boolean: text += "b"
        case .int16: text += "n"
        case .uint16: text += "q"
        case .int32: text += "i"
        case .uint32: text += "u"
        case .int64: text += "x"
        case .uint64: text += "t"
        case .double: text += "d"
        case .string: text += "s"
        case .objectPath: text += "o"
        case .signature: text += "g"
        case .variant: text += "v"
        case .array(let element):
            text += "a"
            element.appendSignature(to: &text)
        case .dictionary(let key, let value):
            text += "a{"
            key.appendSignature(to: &text)
            value.appendSignature(to: &text)
            text += "}"
        case .structure(let fields):
            text += "("
            for field in fields { field.appendSignature(to: &text) }
            text += ")"
        }
    }

    /// The basic type a signature's type code stands for (`s` → `.string`); nil for any other code.
    package init?(basicCode code: UInt8) {
        switch code {
        case UInt8(ascii: "y"): self = .byte
        case UInt8(ascii: "b"): self = .boolean
        case UInt8(ascii: "n"): self = .int16
        case UInt8(ascii: "q"): self = .uint16
        case UInt8(ascii: "i"): self = .int32
        case UInt8(ascii: "u"): self = .uint32
        case UInt8(ascii: "x"): self = .int64
        case UInt8(ascii: "t"): self = .uint64
        case UInt8(ascii: "d"): self = .double
        case UInt8(ascii: "s"): self = .string
        case UInt8(ascii: "o"): self = .objectPath
        case UInt8(ascii: "g"): self = .signature
        default: return nil
        }
    }

    /// Parses exactly one complete type from signature text.
    ///
    /// ```swift
    /// let type = try DBusType(parsing: "a{sv}")   // .dictionary(key: .string, value: .variant)
    /// ```
    /// - Throws: `DBusError` named `org.freedesktop.DBus.Error.InvalidSignature` when the text is not one
    ///   complete, valid type.
    public init(parsing text: String) throws(DBusError) {
        let signature = try Signature(text)
        guard signature.types.count == 1 else {
            throw DBusError(
                .invalidSignature,
                "'\(text)' holds \(signature.types.count) complete types; exactly one was expected")
        }
        self = signature.types[0]
    }
}

// MARK: - CustomStringConvertible

extension DBusType: CustomStringConvertible {
    public var description: String { signatureText }
}
