// SPDX-License-Identifier: Apache-2.0

public import DBus
public import Foundation
public import SettingsModel

/// The representation of a `RawRepresentable` type: its raw value, which is itself a ``SettingValue``.
///
/// It is the default for raw-value enumerations, so declaring the conformance is enough:
///
/// ```swift
/// enum ColorScheme: String, SettingValue { case light, dark, system }   // stored as 's'
/// ```
struct RawRepresentation<Value: RawRepresentable>: SettingRepresentation
where Value.RawValue: SettingValue {
    /// Makes the representation.
    public init() {}

    /// The raw value's type.
    public var dbusType: DBusType? { Value.RawValue.settingRepresentation.dbusType }

    /// Encodes the raw value.
    public func encode(_ value: Value) throws(SettingsError) -> DBusValue? {
        try Value.RawValue.settingRepresentation.encode(value.rawValue)
    }

    /// Decodes the raw value and makes the value from it.
    ///
    /// - Throws: `TypeMismatch` when the raw value does not decode or names no value of the type.
    public func decode(_ value: DBusValue) throws(SettingsError) -> Value {
        let raw = try Value.RawValue.settingRepresentation.decode(value)
        guard let decoded = Value(rawValue: raw) else {
            throw .typeMismatch("\(GVariantText.format(value)) is not a value of \(Value.self)")
        }
        return decoded
    }
}

extension SettingValue where Self: RawRepresentable, RawValue: SettingValue {
    /// The raw value's representation.
    public static var settingRepresentation: some SettingRepresentation<Self> { RawRepresentation<Self>() }
}

extension SettingRepresentations {
    /// The representation of a `LosslessStringConvertible` type: its `description`, stored as `s`.
    ///
    /// ```swift
    /// extension Version: SettingValue {
    ///     static var settingRepresentation: SettingRepresentations.LosslessString<Version> { .init() }
    /// }
    /// ```
    public struct LosslessString<Value: LosslessStringConvertible>: SettingRepresentation {
        /// Makes the representation.
        public init() {}

        /// `s`.
        public var dbusType: DBusType? { .string }

        /// Encodes the value's description.
        public func encode(_ value: Value) throws(SettingsError) -> DBusValue? { .string(value.description) }

        /// Makes the value from its description.
        ///
        /// - Throws: `TypeMismatch` when the value is not a string or the text is not a value of the type.
        public func decode(_ value: DBusValue) throws(SettingsError) -> Value {
            guard case .string(let text) = value else { throw .cannotDecode(value, as: Value.self, expected: .string) }
            guard let decoded = Value(text) else { throw .typeMismatch("'\(text)' is not a value of \(Value.self)") }
            return decoded
        }
    }
}

extension SettingRepresentations {
    /// A representation through another ``SettingValue``: two functions convert to and from a type that is
    /// stored already.
    ///
    /// ```swift
    /// struct Celsius: SettingValue {
    ///     var degrees: Double
    ///     static let settingRepresentation = SettingRepresentations.Proxy<Celsius, Double>(
    ///         to: { $0.degrees }, from: { Celsius(degrees: $0) })
    /// }
    /// ```
    public struct Proxy<Value, Proxy: SettingValue>: SettingRepresentation {
        private let toProxy: @Sendable (Value) throws(SettingsError) -> Proxy
        private let fromProxy: @Sendable (Proxy) throws(SettingsError) -> Value

        /// Makes the representation.
        ///
        /// - Parameters:
        ///   - to: converts a value to the stored proxy.
        ///   - from: converts a stored proxy back; it may throw `TypeMismatch` for a proxy that is no value.
        public init(
            to: @escaping @Sendable (Value) throws(SettingsError) -> Proxy,
            from: @escaping @Sendable (Proxy) throws(SettingsError) -> Value
        ) {
            self.toProxy = to
            self.fromProxy = from
        }

        /// The proxy's type.
        public var dbusType: DBusType? { Proxy.settingRepresentation.dbusType }

        /// Converts to the proxy and encodes it.
        public func encode(_ value: Value) throws(SettingsError) -> DBusValue? {
            try Proxy.settingRepresentation.encode(try toProxy(value))
        }

        /// Decodes the proxy and converts it back.
        public func decode(_ value: DBusValue) throws(SettingsError) -> Value {
            try fromProxy(try Proxy.settingRepresentation.decode(value))
        }
    }
}

// MARK: - Date, URL, UUID

extension Date: SettingValue {
    /// Seconds since 1970-01-01 00:00 UTC, as `d`.
    public static var settingRepresentation: SettingRepresentations.Proxy<Date, Double> {
        SettingRepresentations.Proxy(to: { $0.timeIntervalSince1970 }, from: { Date(timeIntervalSince1970: $0) })
    }
}

extension URL: SettingValue {
    /// The absolute string, as `s`.
    public static var settingRepresentation: SettingRepresentations.Proxy<URL, String> {
        SettingRepresentations.Proxy(
            to: { $0.absoluteString },
            from: { text throws(SettingsError) in
                guard let url = URL(string: text) else { throw .typeMismatch("'\(text)' is not a URL") }
                return url
            })
    }
}

extension UUID: SettingValue {
    /// The UUID string (`E621E1F8-C36C-495A-93FC-0C247A3E6E5F`), as `s`.
    public static var settingRepresentation: SettingRepresentations.Proxy<UUID, String> {
        SettingRepresentations.Proxy(
            to: { $0.uuidString },
            from: { text throws(SettingsError) in
                guard let uuid = UUID(uuidString: text) else { throw .typeMismatch("'\(text)' is not a UUID") }
                return uuid
            })
    }
}
