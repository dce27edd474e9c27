// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

extension SettingRepresentations {
    /// The representation of a `Codable` type as native D-Bus values that scripts can read and write.
    ///
    /// A struct is stored as `a{sv}` with its field names (a "vardict", the D-Bus convention for records that
    /// grow), so `gdbus` and `settingsctl` show `{'family': <'Mono'>, 'size': <12.0>}` rather than an opaque
    /// blob, and adding an optional field later does not invalidate stored values. See `DBusValueEncoder`.
    ///
    /// ```swift
    /// struct Font: Codable, SettingValue {
    ///     var family: String
    ///     var size: Double
    ///     static let settingRepresentation = SettingRepresentations.Codable<Font>()
    /// }
    /// ```
    public struct Codable<Value: Swift.Codable>: SettingRepresentation {
        /// Makes the representation.
        public init() {}

        /// Nil: the type depends on how the value encodes itself (a struct is `a{sv}`).
        public var dbusType: DBusType? { nil }

        /// Encodes the value with `DBusValueEncoder`.
        ///
        /// - Throws: `InvalidValue` with the encoder's reason.
        public func encode(_ value: Value) throws(SettingsError) -> DBusValue? {
            do {
                return try DBusValueEncoder().encode(value)
            } catch {
                throw .invalidValue("\(Value.self) cannot be stored: \(error)")
            }
        }

        /// Decodes the value with `DBusValueDecoder`.
        ///
        /// - Throws: `TypeMismatch` with the decoder's reason.
        public func decode(_ value: DBusValue) throws(SettingsError) -> Value {
            do {
                return try DBusValueDecoder().decode(Value.self, from: value)
            } catch {
                throw .typeMismatch("\(GVariantText.format(value)) cannot be read as \(Value.self): \(error)")
            }
        }
    }
}
