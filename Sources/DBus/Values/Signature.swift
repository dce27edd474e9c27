// SPDX-License-Identifier: Apache-2.0

/// A validated D-Bus signature: a sequence of zero or more complete types.
///
/// The parser applies every rule of the D-Bus specification: at most 255 bytes, arrays and structures each
/// nested at most 32 deep, dictionary keys of a basic type, dictionary entries only inside arrays, no empty
/// structures. Unix file descriptors (`h`) are refused because SettingsBus cannot carry them.
///
/// Valid: `""`, `s`, `a{sv}`, `(iis)as`. Invalid: `a`, `{sv}`, `a{vs}`, `()`, `h`, `z`.
public struct Signature: Sendable, Hashable {
    /// The signature text, for example `sa{sv}`.
    public let text: String
    /// The complete types, in order.
    public let types: [DBusType]

    /// The empty signature.
    public static let empty = Signature(types: [])

    /// The longest signature the specification allows, in bytes.
    public static let maximumLength = 255
    /// The deepest nesting of arrays, and separately of structures, that the specification allows.
    public static let maximumContainerDepth = 32

    /// Parses and validates signature text.
    ///
    /// - Throws: `DBusError` named `org.freedesktop.DBus.Error.InvalidSignature`, whose message says what is
    ///   wrong and where.
    public init(_ text: String) throws(DBusError) {
        let bytes = Array(text.utf8)
        guard bytes.count <= Signature.maximumLength else {
            throw DBusError(
                .invalidSignature,
                "signature is \(bytes.count) bytes long; D-Bus allows at most \(Signature.maximumLength)")
        }
        var parser = SignatureParser(bytes: bytes, text: text)
        var types: [DBusType] = []
        while !parser.atEnd {
            types.append(try parser.parseCompleteType(arrayDepth: 0, structDepth: 0))
        }
        self.text = text
        self.types = types
    }

    /// Makes the signature of a list of types.
    public init(types: [DBusType]) {
        var text = ""
        for type in types { type.appendSignature(to: &text) }
        self.text = text
        self.types = types
    }

    /// Makes the signature of a single type.
    public init(_ type: DBusType) {
        self.init(types: [type])
    }
}

// MARK: - CustomStringConvertible

extension Signature: CustomStringConvertible {
    public var description: String { text }
}

/// A recursive-descent parser over the bytes of a signature.
struct SignatureParser {
    let bytes: [UInt8]
    let text: String
    var index = 0

    init(bytes: [UInt8], text: String) {
        self.bytes = bytes
        self.text = text
    }

    var atEnd: Bool { index >= bytes.count }

    func failure(_ reason: String) -> DBusError {
        DBusError(.invalidSignature, "invalid signature '\(text)' at byte \(index): \(reason)")
    }

    mutating func parseCompleteType(arrayDepth: Int, structDepth: Int) throws(DBusError) -> DBusType {
        guard index < bytes.count else { throw failure("a complete type was expected") }
        let code = bytes[index]
        index += 1
        if let basic = DBusType(basicCode: code) { return basic }
        switch code {
        case UInt8(ascii: "v"): return .variant
        case UInt8(ascii: "h"):
            index -= 1
            throw failure("unix file descriptors ('h') are not supported")
        case UInt8(ascii: "a"):
            guard arrayDepth < Signature.maximumContainerDepth else {
                index -= 1
                throw failure("arrays nested deeper than \(Signature.maximumContainerDepth)")
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "{") {
                index += 1
                let key = try parseCompleteType(arrayDepth: arrayDepth + 1, structDepth: structDepth)
                guard key.isBasic else { throw failure("a dictionary key must be a basic type, not '\(key)'") }
                let value = try parseCompleteType(arrayDepth: arrayDepth + 1, structDepth: structDepth)
                guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else {
                    throw failure("a dictionary entry holds exactly one key and one value, then '}'")
                }
                index += 1
                return .dictionary(key: key, value: value)
            }
            return .array(try parseCompleteType(arrayDepth: arrayDepth + 1, structDepth: structDepth))
        case UInt8(ascii: "("):
            guard structDepth < Signature.maximumContainerDepth else {
                index -= 1
                throw failure("structures nested deeper than \(Signature.maximumContainerDepth)")
            }
            var fields: [DBusType] = []
            while true {
                guard index < bytes.count else { throw failure("unterminated structure: ')' expected") }
                if bytes[index] == UInt8(ascii: ")") {
                    index += 1
                    break
                }
                fields.append(try parseCompleteType(arrayDepth: arrayDepth, structDepth: structDepth + 1))
            }
            guard !fields.isEmpty else { throw failure("a structure must hold at least one field") }
            return .structure(fields)
        case UInt8(ascii: "{"):
            index -= 1
            throw failure("a dictionary entry '{…}' may appear only as an array element")
        default:
            index -= 1
            let shown = code < 0x80 ? String(UnicodeScalar(code)) : "\\x" + String(code, radix: 16)
            throw failure("'\(shown)' is not a D-Bus type code")
        }
    }
}
