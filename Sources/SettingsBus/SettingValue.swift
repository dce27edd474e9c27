// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

/// A type whose values can be stored in the settings bus.
///
/// A conforming type names a ``SettingRepresentation`` that maps its values onto D-Bus values. The standard
/// types are native (`Bool` is `b`, `Int32` is `i`, `String` is `s`, `[T]` is `a…`, `[String: T]` is
/// `a{s…}`); other types pick a representation that composes:
///
/// ```swift
/// enum ColorScheme: String, SettingValue { case light, dark, system }      // stored as its raw value, 's'
///
/// struct Font: Codable, SettingValue {                                    // stored as a{sv}: field names kept
///     var family: String
///     var size: Double
///     static let settingRepresentation = SettingRepresentations.Codable<Font>()
/// }
///
/// struct Version: LosslessStringConvertible, SettingValue {               // stored as its description, 's'
///     …
///     static let settingRepresentation = SettingRepresentations.LosslessString<Version>()
/// }
/// ```
///
/// A key's type becomes the D-Bus signature it registers with the broker, so the broker refuses a value of
/// any other type, from any client.
public protocol SettingValue: Sendable {
    /// The representation that maps values of this type onto D-Bus values.
    associatedtype Representation: SettingRepresentation<Self>

    /// The representation that maps values of this type onto D-Bus values.
    static var settingRepresentation: Representation { get }
}

/// A mapping between the values of a Swift type and D-Bus values.
///
/// The library's own are in ``SettingRepresentations``. Implement one (with `import DBus`, for the D-Bus
/// values) to store a type in a way of your own.
public protocol SettingRepresentation<Value>: Sendable {
    /// The Swift type.
    associatedtype Value

    /// The D-Bus type of every encoded value, when it is known without a value; nil when it depends on the
    /// value (a Codable type is `a{sv}`, `av` or a single value, depending on how it encodes itself).
    var dbusType: DBusType? { get }

    /// Encodes a value; nil means "no value" (only an optional representation returns it).
    ///
    /// - Throws: ``SettingsError`` `InvalidValue` when the value cannot be represented.
    func encode(_ value: Value) throws(SettingsError) -> DBusValue?

    /// Decodes a D-Bus value.
    ///
    /// - Throws: ``SettingsError`` `TypeMismatch` when the value has another type or shape.
    func decode(_ value: DBusValue) throws(SettingsError) -> Value

    /// The value that stands for "no value", if the type has one (`Optional.none`).
    var absentValue: Value? { get }
}

extension SettingRepresentation {
    /// No value stands for "no value", except in an optional representation.
    public var absentValue: Value? { nil }
}

extension SettingValue {
    /// Encodes the value with the type's representation; nil means "no value".
    ///
    /// - Throws: ``SettingsError`` `InvalidValue` when the value cannot be represented.
    package func encodedSetting() throws(SettingsError) -> DBusValue? {
        try Self.settingRepresentation.encode(self)
    }

    /// Decodes a value with the type's representation.
    ///
    /// - Throws: ``SettingsError`` `TypeMismatch` when the value has another type or shape.
    package init(decodingSetting value: DBusValue) throws(SettingsError) {
        self = try Self.settingRepresentation.decode(value)
    }
}

extension SettingsError {
    /// A `TypeMismatch` for a D-Bus value that does not decode as a Swift type.
    static func cannotDecode(_ value: DBusValue, as type: Any.Type, expected: DBusType?) -> SettingsError {
        let wanted = expected.map { " (expected '\($0)')" } ?? ""
        return .typeMismatch(
            "a value of type '\(value.type)' cannot be read as \(type)\(wanted): \(GVariantText.format(value))")
    }
}
