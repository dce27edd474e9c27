// SPDX-License-Identifier: Apache-2.0

package import DBus

/// An encoder from `Encodable` values to D-Bus values that scripts can read.
///
/// A keyed container (a struct, a class, an enum with associated values) becomes `a{sv}` with its field
/// names, an unkeyed container becomes `av`, and a single value its own D-Bus type. A field whose type is a
/// ``SettingValue`` uses that type's representation, so an `Int` is `x`, a `Date` is `d`, a `[String]` is
/// `as` and a `Data` is `ay`. A `nil` field (`encodeIfPresent`) is left out.
///
/// ```swift
/// struct Font: Codable { var family: String; var size: Double }
/// let value = try DBusValueEncoder().encode(Font(family: "Mono", size: 12))
/// // {'family': <'Mono'>, 'size': <12.0>}, type a{sv}
/// ```
package struct DBusValueEncoder: Sendable {
    /// Makes an encoder.
    package init() {}

    /// Encodes a value.
    ///
    /// - Throws: `EncodingError.invalidValue` for a value that encodes nothing, or a `nil` inside an array.
    package func encode<T: Encodable>(_ value: T) throws -> DBusValue {
        let slot = EncodingSlot()
        try value.encode(to: SlotEncoder(slot: slot, codingPath: []))
        guard let encoded = try slot.finish(codingPath: []) else {
            throw EncodingError.invalidValue(
                value, EncodingError.Context(codingPath: [], debugDescription: "\(T.self) encoded no value"))
        }
        return encoded
    }
}

/// Where one encoded value is collected, until ``finish(codingPath:)`` turns it into a D-Bus value.
final class EncodingSlot {
    enum Content {
        case empty
        case value(DBusValue)
        case keyed([(key: String, slot: EncodingSlot)])
        case unkeyed([EncodingSlot])
    }

    var content: Content = .empty

    func finish(codingPath: [any CodingKey]) throws -> DBusValue? {
        switch content {
        case .empty:
            return nil
        case .value(let value):
            return value
        case .keyed(let entries):
            var dictionary: [DBusDictEntry] = []
            var seen = Set<String>()
            for (key, slot) in entries where !seen.contains(key) {
                seen.insert(key)
                guard let value = try slot.finish(codingPath: codingPath) else { continue }
                dictionary.append(DBusDictEntry(key: .string(key), value: .variant(value)))
            }
            return .dictionary(key: .string, value: .variant, dictionary)
        case .unkeyed(let elements):
            var array: [DBusValue] = []
            for element in elements {
                guard let value = try element.finish(codingPath: codingPath) else {
                    throw EncodingError.invalidValue(
                        "nil", EncodingError.Context(codingPath: codingPath, debugDescription: "an array cannot hold nil"))
                }
                array.append(.variant(value))
            }
            return .array(.variant, array)
        }
    }

    func keyedEntries() -> [(key: String, slot: EncodingSlot)] {
        if case .keyed(let entries) = content { return entries }
        return []
    }
}

/// The `Encoder` that writes into an ``EncodingSlot``.
struct SlotEncoder: Encoder {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .keyed = slot.content {} else { slot.content = .keyed([]) }
        return KeyedEncodingContainer(KeyedSlotContainer<Key>(slot: slot, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .unkeyed = slot.content {} else { slot.content = .unkeyed([]) }
        return UnkeyedSlotContainer(slot: slot, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleSlotContainer(slot: slot, codingPath: codingPath)
    }

    /// Encodes a value into `slot`: through its ``SettingValue`` representation when it has one, else
    /// through its own `encode(to:)`.
    static func encode<T: Encodable>(_ value: T, into slot: EncodingSlot, codingPath: [any CodingKey]) throws {
        if let native = value as? any SettingValue {
            slot.content = try encodeSetting(native).map { .value($0) } ?? .empty
            return
        }
        try value.encode(to: SlotEncoder(slot: slot, codingPath: codingPath))
    }

    private static func encodeSetting<V: SettingValue>(_ value: V) throws -> DBusValue? {
        try V.settingRepresentation.encode(value)
    }
}

struct KeyedSlotContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]

    private func child(_ key: Key) -> EncodingSlot {
        let child = EncodingSlot()
        slot.content = .keyed(slot.keyedEntries() + [(key.stringValue, child)])
        return child
    }

    mutating func encodeNil(forKey key: Key) throws { _ = child(key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try SlotEncoder.encode(value, into: child(key), codingPath: codingPath + [key])
    }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        SlotEncoder(slot: child(key), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        SlotEncoder(slot: child(key), codingPath: codingPath + [key]).unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder {
        SlotEncoder(slot: child(Key(stringValue: "super")!), codingPath: codingPath)
    }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        SlotEncoder(slot: child(key), codingPath: codingPath + [key])
    }
}

struct UnkeyedSlotContainer: UnkeyedEncodingContainer {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]

    var count: Int {
        if case .unkeyed(let elements) = slot.content { return elements.count }
        return 0
    }

    private func child() -> EncodingSlot {
        let child = EncodingSlot()
        if case .unkeyed(let elements) = slot.content { slot.content = .unkeyed(elements + [child]) }
        return child
    }

    mutating func encodeNil() throws {
        throw EncodingError.invalidValue(
            "nil", EncodingError.Context(codingPath: codingPath, debugDescription: "an array cannot hold nil"))
    }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try SlotEncoder.encode(value, into: child(), codingPath: codingPath)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        SlotEncoder(slot: child(), codingPath: codingPath).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        SlotEncoder(slot: child(), codingPath: codingPath).unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder {
        SlotEncoder(slot: child(), codingPath: codingPath)
    }
}

struct SingleSlotContainer: SingleValueEncodingContainer {
    let slot: EncodingSlot
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.content = .empty }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try SlotEncoder.encode(value, into: slot, codingPath: codingPath)
    }
}
