// SPDX-License-Identifier: Apache-2.0

package import DBus
import SettingsModel

/// A decoder from D-Bus values to `Decodable` values, the inverse of `DBusValueEncoder`.
///
/// A keyed container reads a string-keyed dictionary (`a{sv}`, or any `a{s…}`), an unkeyed container any
/// array, and a single value any value; variants are unwrapped. A field whose type is a ``SettingValue`` is
/// decoded through that type's representation. A key missing from the dictionary is `nil` for an optional
/// field and an error for any other.
package struct DBusValueDecoder: Sendable {
    /// Makes a decoder.
    package init() {}

    /// Decodes a value.
    ///
    /// - Throws: `DecodingError` when the value's shape or types do not match `T`.
    package func decode<T: Decodable>(_ type: T.Type, from value: DBusValue) throws -> T {
        try T(from: ValueDecoder(value: value.unwrappingVariants, codingPath: []))
    }
}

extension DBusValue {
    /// The value inside any number of variants.
    var unwrappingVariants: DBusValue {
        var value = self
        while case .variant(let inner) = value { value = inner }
        return value
    }
}

/// The `Decoder` over one D-Bus value.
struct ValueDecoder: Decoder {
    let value: DBusValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .dictionary(.string, _, let entries) = value else {
            throw mismatch([String: DBusValue].self, "a dictionary with string keys")
        }
        var fields: [String: DBusValue] = [:]
        for entry in entries {
            if case .string(let key) = entry.key { fields[key] = entry.value.unwrappingVariants }
        }
        return KeyedDecodingContainer(KeyedValueContainer<Key>(fields: fields, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(_, let elements) = value else { throw mismatch([DBusValue].self, "an array") }
        return UnkeyedValueContainer(elements: elements.map(\.unwrappingVariants), codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueContainer(value: value, codingPath: codingPath)
    }

    func mismatch(_ type: Any.Type, _ expected: String) -> DecodingError {
        DecodingError.typeMismatch(
            type,
            DecodingError.Context(
                codingPath: codingPath, debugDescription: "expected \(expected), found type '\(value.type)'"))
    }

    /// Decodes `value` as `T`: through its ``SettingValue`` representation when it has one.
    static func decode<T: Decodable>(_ type: T.Type, from value: DBusValue, codingPath: [any CodingKey]) throws -> T {
        if let setting = type as? any SettingValue.Type {
            return try decodeSetting(setting, value, codingPath: codingPath) as! T
        }
        return try T(from: ValueDecoder(value: value, codingPath: codingPath))
    }

    private static func decodeSetting<V: SettingValue>(
        _ type: V.Type, _ value: DBusValue, codingPath: [any CodingKey]
    ) throws -> V {
        do {
            return try V.settingRepresentation.decode(value)
        } catch {
            throw DecodingError.typeMismatch(
                V.self, DecodingError.Context(codingPath: codingPath, debugDescription: error.message))
        }
    }
}

struct KeyedValueContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let fields: [String: DBusValue]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { fields.keys.compactMap { Key(stringValue: $0) } }
    func contains(_ key: Key) -> Bool { fields[key.stringValue] != nil }

    private func field(_ key: Key) throws -> DBusValue {
        guard let value = fields[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, DecodingError.Context(codingPath: codingPath, debugDescription: "no field '\(key.stringValue)'"))
        }
        return value
    }

    func decodeNil(forKey key: Key) throws -> Bool { fields[key.stringValue] == nil }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try ValueDecoder.decode(type, from: try field(key), codingPath: codingPath + [key])
    }
    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try ValueDecoder(value: try field(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(value: try field(key), codingPath: codingPath + [key]).unkeyedContainer()
    }
    func superDecoder() throws -> any Decoder {
        ValueDecoder(value: fields["super"] ?? .dictionary(key: .string, value: .variant, []), codingPath: codingPath)
    }
    func superDecoder(forKey key: Key) throws -> any Decoder {
        ValueDecoder(value: try field(key), codingPath: codingPath + [key])
    }
}

struct UnkeyedValueContainer: UnkeyedDecodingContainer {
    let elements: [DBusValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    init(elements: [DBusValue], codingPath: [any CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private mutating func next(_ type: Any.Type) throws -> DBusValue {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type, DecodingError.Context(codingPath: codingPath, debugDescription: "the array has no more elements"))
        }
        defer { currentIndex += 1 }
        return elements[currentIndex]
    }

    mutating func decodeNil() throws -> Bool { false }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try ValueDecoder.decode(type, from: try next(type), codingPath: codingPath)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try ValueDecoder(value: try next(type), codingPath: codingPath).container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try ValueDecoder(value: try next([Any].self), codingPath: codingPath).unkeyedContainer()
    }
    mutating func superDecoder() throws -> any Decoder {
        ValueDecoder(value: try next(Any.self), codingPath: codingPath)
    }
}

struct SingleValueContainer: SingleValueDecodingContainer {
    let value: DBusValue
    let codingPath: [any CodingKey]

    func decodeNil() -> Bool { false }
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try ValueDecoder.decode(type, from: value, codingPath: codingPath)
    }
}
