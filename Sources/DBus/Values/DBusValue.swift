// SPDX-License-Identifier: Apache-2.0

import Glibc

/// A D-Bus value of any type that SettingsBus carries (every type but unix file descriptors).
///
/// Containers carry their element types, so an empty array still has a complete type:
///
/// ```swift
/// let names: DBusValue = .array(.string, [.string("a"), .string("b")])
/// let options: DBusValue = .dictionary(key: .string, value: .variant, [
///     .init(key: .string("if-serial"), value: .variant(.uint64(42))),
/// ])
/// ```
///
/// A value is checked with ``validate()`` before it reaches libdbus; `DBusConnection` does so on every send.
///
/// Numbers, text, paths and arrays sit in the value itself (it is 17 bytes); only a variant, a dictionary and a
/// signature are boxed, so reading a message or building one allocates nothing for most of its values.
public enum DBusValue: Sendable, Hashable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(ObjectPath)
    indirect case signature(Signature)
    indirect case variant(DBusValue)
    /// An array whose elements are all of the given type.
    case array(DBusType, [DBusValue])
    /// A dictionary (`a{KV}`): entries in order; keys are of a basic type.
    indirect case dictionary(key: DBusType, value: DBusType, [DBusDictEntry])
    /// A structure of one or more fields.
    case structure([DBusValue])

    /// The complete type of the value.
    public var type: DBusType {
        switch self {
        case .byte: return .byte
        case .boolean: return .boolean
        case .int16: return .int16
        case .uint16: return .uint16
        case .int32: return .int32
        case .uint32: return .uint32
        case .int64: return .int64
        case .uint64: return .uint64
        case .double: return .double
        case .string: return .string
        case .objectPath: return .objectPath
        case .signature: return .signature
        case .variant: return .variant
        case .array(let element, _): return .array(element)
        case .dictionary(let key, let value, _): return .dictionary(key: key, value: value)
        case .structure(let fields): return .structure(fields.map(\.type))
        }
    }

    /// How deeply containers nest in the value, counting every array, dictionary, structure and variant.
    ///
    /// A basic value has depth 0, `as` holding strings 1, `a{sv}` holding a string 3 (array, entry, variant).
    /// The D-Bus specification limits a whole message to 64.
    public var nestingDepth: Int {
        switch self {
        case .variant(let inner): return 1 + inner.nestingDepth
        case .array(_, let elements): return 1 + (elements.map(\.nestingDepth).max() ?? 0)
        case .dictionary(_, _, let entries):
            return 2 + (entries.map { max($0.key.nestingDepth, $0.value.nestingDepth) }.max() ?? 0)
        case .structure(let fields): return 1 + (fields.map(\.nestingDepth).max() ?? 0)
        default: return 0
        }
    }

    /// Checks that the value can be sent: its type is a valid signature (so every container holds a
    /// complete type and nests within the limits), strings hold no NUL, signature values are valid, every
    /// element matches its container's type, and the whole value nests at most ``maximumTotalDepth`` levels.
    ///
    /// - Throws: `DBusError` named `org.freedesktop.DBus.Error.InvalidArgs` saying what is wrong.
    public func validate() throws(DBusError) {
        try validate(totalDepth: 0)
    }

    /// The deepest total nesting of containers, variants included, that a message may hold.
    public static let maximumTotalDepth = 64

    private func validate(totalDepth: Int) throws(DBusError) {
        // Every basic type, and `v`, is a valid signature by itself; only a container's type can be invalid.
        if case .variant = self {
        } else if !type.isBasic {
            do { _ = try Signature(type.signatureText) } catch {
                throw DBusError(.invalidArgs, "value of an invalid type: \(error.message)")
            }
        }
        try validateContents(totalDepth: totalDepth)
    }

    /// Whether the text holds a NUL byte, with one `memchr` over a native string's bytes.
    private static func containsNUL(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, 0, bytes.count) != nil
        }
    }

    private func validateContents(totalDepth: Int) throws(DBusError) {
        guard totalDepth <= DBusValue.maximumTotalDepth else {
            throw DBusError(.invalidArgs, "value nests containers deeper than \(DBusValue.maximumTotalDepth) levels")
        }
        switch self {
        case .string(let text):
            guard !Self.containsNUL(text) else {
                throw DBusError(.invalidArgs, "D-Bus strings cannot contain a NUL character")
            }
        case .signature(let signature):
            // `Signature(types:)` does not check its types (a hand-built `.structure([])` or 33 nested arrays),
            // and libdbus aborts the process when asked to append an invalid signature.
            do { _ = try Signature(signature.text) } catch {
                throw DBusError(.invalidArgs, "signature value is invalid: \(error.message)")
            }
        case .variant(let inner):
            // A variant starts a new signature, so its contents are checked as a value of their own (a basic
            // type is always a valid signature).
            if !inner.type.isBasic {
                do { _ = try Signature(inner.type.signatureText) } catch {
                    throw DBusError(.invalidArgs, "variant holds a value of an invalid type: \(error.message)")
                }
            }
            try inner.validateContents(totalDepth: totalDepth + 1)
        case .array(let element, let elements):
            for value in elements {
                guard value.type == element else {
                    throw DBusError(.invalidArgs, "array of '\(element)' holds an element of type '\(value.type)'")
                }
                try value.validateContents(totalDepth: totalDepth + 1)
            }
        case .dictionary(let keyType, let valueType, let entries):
            for entry in entries {
                guard entry.key.type == keyType, entry.value.type == valueType else {
                    throw DBusError(
                        .invalidArgs,
                        "dictionary of '{\(keyType)\(valueType)}' holds an entry of types "
                            + "'\(entry.key.type)', '\(entry.value.type)'")
                }
                try entry.key.validateContents(totalDepth: totalDepth + 2)
                try entry.value.validateContents(totalDepth: totalDepth + 2)
            }
        case .structure(let fields):
            for field in fields { try field.validateContents(totalDepth: totalDepth + 1) }
        default:
            break
        }
    }
}

/// One entry of a D-Bus dictionary.
public struct DBusDictEntry: Sendable, Hashable {
    /// The key, of a basic type.
    public var key: DBusValue
    /// The value.
    public var value: DBusValue

    /// Makes an entry.
    public init(key: DBusValue, value: DBusValue) {
        self.key = key
        self.value = value
    }
}
