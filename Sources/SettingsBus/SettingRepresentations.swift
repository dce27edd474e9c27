// SPDX-License-Identifier: Apache-2.0

/// The representations a type picks for itself (``SettingValue/settingRepresentation``), and the protocols of
/// the types the D-Bus type system has a type for.
///
/// The standard types need none of them: `Bool`, the integers, `Double`, `String`, `Data`, `Date`, `URL`,
/// arrays, sets, dictionaries with `String` keys, optionals and `RawRepresentable` types are settings values as
/// they are. A type of the app's own picks one:
///
/// ```swift
/// struct Font: Codable, SettingValue {                                    // stored as a{sv}: field names kept
///     var family: String
///     var size: Double
///     static let settingRepresentation = SettingRepresentations.Codable<Font>()
/// }
/// ```
///
/// A representation of the app's own conforms to ``SettingRepresentation`` (with `import DBus`, for the D-Bus
/// values it maps to).
public enum SettingRepresentations {}
