// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The representation of an array, `a<element type>`; elements whose type depends on the value (Codable
/// ones) make the array `av`.
struct ArrayRepresentation<Element: SettingValue>: SettingRepresentation {
    /// Makes the representation.
    public init() {}

    /// `a` followed by the element's type, or `av`.
    public var dbusType: DBusType? { .array(Element.settingRepresentation.dbusType ?? .variant) }

    /// Encodes each element.
    ///
    /// - Throws: `InvalidValue` for an element that encodes as "no value" (a nil inside an array).
    public func encode(_ value: [Element]) throws(SettingsError) -> DBusValue? {
        let elementType = Element.settingRepresentation.dbusType
        var encoded: [DBusValue] = []
        encoded.reserveCapacity(value.count)
        for element in value {
            guard let one = try Element.settingRepresentation.encode(element) else {
                throw .invalidValue("an array of \(Element.self) cannot hold a nil element")
            }
            encoded.append(elementType == nil ? .variant(one) : one)
        }
        return .array(elementType ?? .variant, encoded)
    }

    /// Decodes each element.
    ///
    /// - Throws: `TypeMismatch` when the value is not an array or an element does not decode.
    public func decode(_ value: DBusValue) throws(SettingsError) -> [Element] {
        guard case .array(_, let elements) = value else {
            throw .cannotDecode(value, as: [Element].self, expected: dbusType)
        }
        var decoded: [Element] = []
        decoded.reserveCapacity(elements.count)
        for element in elements {
            if case .variant(let inner) = element, Element.settingRepresentation.dbusType != .variant {
                decoded.append(try Element.settingRepresentation.decode(inner))
            } else {
                decoded.append(try Element.settingRepresentation.decode(element))
            }
        }
        return decoded
    }
}

extension Array: SettingValue where Element: SettingValue {
    /// `a<element type>`.
    public static var settingRepresentation: some SettingRepresentation<Self> { ArrayRepresentation<Element>() }
}

/// The representation of a set: an array (`a<element type>`) in a stable order, the order of the elements'
/// GVariant text, so that equal sets are stored equally.
struct SetRepresentation<Element: SettingValue & Hashable>: SettingRepresentation {
    /// Makes the representation.
    public init() {}

    /// As for an array of the elements.
    public var dbusType: DBusType? { ArrayRepresentation<Element>().dbusType }

    /// Encodes the elements as a sorted array.
    public func encode(_ value: Set<Element>) throws(SettingsError) -> DBusValue? {
        guard case .array(let type, let elements)? = try ArrayRepresentation<Element>().encode(Array(value)) else {
            return nil
        }
        let sorted = elements.map { (GVariantText.format($0), $0) }.sorted { $0.0 < $1.0 }.map(\.1)
        return .array(type, sorted)
    }

    /// Decodes an array into a set.
    public func decode(_ value: DBusValue) throws(SettingsError) -> Set<Element> {
        Set(try ArrayRepresentation<Element>().decode(value))
    }
}

extension Set: SettingValue where Element: SettingValue {
    /// An array of the elements, in a stable order.
    public static var settingRepresentation: some SettingRepresentation<Self> { SetRepresentation<Element>() }
}

/// The representation of a string-keyed dictionary, `a{s<value type>}`; values whose type depends on the
/// value (Codable ones) make it `a{sv}`.
struct DictionaryRepresentation<Value: SettingValue>: SettingRepresentation {
    /// Makes the representation.
    public init() {}

    /// `a{s…}`.
    public var dbusType: DBusType? {
        .dictionary(key: .string, value: Value.settingRepresentation.dbusType ?? .variant)
    }

    /// Encodes the entries, sorted by key.
    ///
    /// - Throws: `InvalidValue` for a value that encodes as "no value".
    public func encode(_ value: [String: Value]) throws(SettingsError) -> DBusValue? {
        let valueType = Value.settingRepresentation.dbusType
        var entries: [DBusDictEntry] = []
        entries.reserveCapacity(value.count)
        for (key, element) in value.sorted(by: { $0.key < $1.key }) {
            guard let one = try Value.settingRepresentation.encode(element) else {
                throw .invalidValue("a dictionary of \(Value.self) cannot hold a nil value (key '\(key)')")
            }
            entries.append(DBusDictEntry(key: .string(key), value: valueType == nil ? .variant(one) : one))
        }
        return .dictionary(key: .string, value: valueType ?? .variant, entries)
    }

    /// Decodes the entries.
    ///
    /// - Throws: `TypeMismatch` when the value is not a string-keyed dictionary or a value does not decode.
    public func decode(_ value: DBusValue) throws(SettingsError) -> [String: Value] {
        guard case .dictionary(.string, _, let entries) = value else {
            throw .cannotDecode(value, as: [String: Value].self, expected: dbusType)
        }
        var decoded: [String: Value] = [:]
        decoded.reserveCapacity(entries.count)
        for entry in entries {
            guard case .string(let key) = entry.key else { continue }
            if case .variant(let inner) = entry.value, Value.settingRepresentation.dbusType != .variant {
                decoded[key] = try Value.settingRepresentation.decode(inner)
            } else {
                decoded[key] = try Value.settingRepresentation.decode(entry.value)
            }
        }
        return decoded
    }
}

extension Dictionary: SettingValue where Key == String, Value: SettingValue {
    /// `a{s<value type>}`.
    public static var settingRepresentation: some SettingRepresentation<Self> { DictionaryRepresentation<Value>() }
}

/// The representation of an optional: `nil` is "no value" (setting it resets the key), anything else is
/// stored as the wrapped type.
struct OptionalRepresentation<Wrapped: SettingValue>: SettingRepresentation {
    /// Makes the representation.
    public init() {}

    /// The wrapped type's.
    public var dbusType: DBusType? { Wrapped.settingRepresentation.dbusType }

    /// Encodes the wrapped value; nil for `nil`.
    public func encode(_ value: Wrapped?) throws(SettingsError) -> DBusValue? {
        guard let value else { return nil }
        return try Wrapped.settingRepresentation.encode(value)
    }

    /// Decodes the wrapped value.
    public func decode(_ value: DBusValue) throws(SettingsError) -> Wrapped? {
        try Wrapped.settingRepresentation.decode(value)
    }

    /// `nil`.
    public var absentValue: Wrapped?? { .some(nil) }
}

extension Optional: SettingValue where Wrapped: SettingValue {
    /// The wrapped type's representation, with `nil` for "no value".
    public static var settingRepresentation: some SettingRepresentation<Self> { OptionalRepresentation<Wrapped>() }
}
