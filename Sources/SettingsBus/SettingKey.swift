// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

/// A typed setting: a key path, a default, and what people are told about it.
///
/// Define keys as static members, so call sites read `settings.get(.colorScheme)`:
///
/// ```swift
/// enum ColorScheme: String, SettingValue { case light, dark, system }
///
/// extension SettingKey where Value == ColorScheme {
///     static var colorScheme: Self { .init("/org/example/app/color-scheme", default: .system) }
/// }
///
/// extension SettingKey where Value == Int {
///     /// A key with a runtime part.
///     static func windowWidth(_ window: String) -> Self {
///         .init(try! SettingPath("/org/example/app/windows/\(window)/width"), default: 800)
///     }
/// }
/// ```
///
/// The key's type is the D-Bus signature it registers (`register(_:)`): the broker then refuses values of
/// any other type, from any client or script.
public struct SettingKey<Value: SettingValue>: Sendable {
    /// The key path.
    public let path: SettingPath
    /// The value read when the key has no value (and, once registered, the broker's default).
    public let defaultValue: Value
    /// A one-line summary, registered with the key.
    public var summary: String?
    /// A longer description, registered with the key.
    public var description: String?
    /// The inclusive range of accepted values, registered with the key.
    public var range: SettingRange?
    /// The only accepted values, registered with the key.
    public var choices: [Value]?
    /// Whether the value is kept out of change signals (other processes re-read it); the broker gives it only
    /// to root, its own user and the users of its `--secret-readers` (others get `AccessDenied`).
    public var isSecret: Bool
    /// Whether the key can change only in debug builds (see ``init(debug:default:release:summary:)``).
    public let isDebugOnly: Bool
    /// What a debug-only key reads in a release build.
    let releaseValue: Value?

    /// Makes a key.
    ///
    /// - Parameters:
    ///   - path: the key path, such as `"/org/example/app/color-scheme"`.
    ///   - defaultValue: the value read when the key has no value.
    ///   - summary: a one-line summary for people.
    ///   - description: a longer description.
    ///   - isSecret: whether the value is kept out of change signals.
    public init(
        _ path: SettingPath, default defaultValue: Value, summary: String? = nil, description: String? = nil,
        isSecret: Bool = false
    ) {
        self.path = path
        self.defaultValue = defaultValue
        self.summary = summary
        self.description = description
        self.range = nil
        self.choices = nil
        self.isSecret = isSecret
        self.isDebugOnly = false
        self.releaseValue = nil
    }

    /// Makes a key from a literal path.
    ///
    /// A literal that breaks the key grammar is a programmer error and traps, naming the rule it breaks;
    /// use ``init(_:default:summary:description:isSecret:)`` with a ``SettingPath`` for paths
    /// made at run time.
    public init(
        _ path: StaticString, default defaultValue: Value, summary: String? = nil, description: String? = nil,
        isSecret: Bool = false
    ) {
        self.init(
            Self.literalPath(path), default: defaultValue, summary: summary, description: description,
            isSecret: isSecret)
    }

    static func literalPath(_ path: StaticString) -> SettingPath {
        do {
            return try SettingPath(path.description)
        } catch {
            preconditionFailure(error.message)
        }
    }

    /// Makes a key that can change only in debug builds: in a release build it always reads `release`, and
    /// writing it fails with `NotWritable`.
    ///
    /// ```swift
    /// extension SettingKey where Value == Bool {
    ///     static var showFrameRate: Self { .init(debug: "/org/example/app/debug/show-frame-rate", default: true, release: false) }
    /// }
    /// ```
    public init(debug path: StaticString, default defaultValue: Value, release: Value, summary: String? = nil) {
        self.path = Self.literalPath(path)
        self.defaultValue = defaultValue
        self.summary = summary
        self.description = nil
        self.range = nil
        self.choices = nil
        self.isSecret = false
        self.isDebugOnly = true
        self.releaseValue = release
    }

    /// The key with the only values it accepts; the broker refuses any other.
    public func choices(_ values: [Value]) -> Self {
        var key = self
        key.choices = values
        return key
    }

    /// The key with an inclusive range of accepted values; the broker refuses values outside it.
    public func range(_ range: ClosedRange<Value>) -> Self where Value: SettingRepresentations.NativeValue & Comparable {
        var key = self
        key.range = SettingRange(min: range.lowerBound.nativeDBusValue, max: range.upperBound.nativeDBusValue)
        return key
    }

    /// The value a debug-only key is fixed to in this build, or nil when the key can change.
    public var fixedValue: Value? {
        #if DEBUG
        return nil
        #else
        return isDebugOnly ? releaseValue : nil
        #endif
    }

    /// Reads a stored effective value (nil: the key has none) as the key's type.
    ///
    /// - Returns: the value; when the stored value does not decode, the key's default and the reason.
    ///
    /// Package access: the typed API and the test kit use it; an app reads values through the store.
    @inlinable
    package func decode(_ value: DBusValue?) -> (value: Value, mismatch: SettingsError?) {
        if let fixed = fixedValue { return (fixed, nil) }
        return Self.decode(value, default: defaultValue)
    }

    /// ``decode(_:)`` of a key that is not fixed, from its default alone: what a stream keeps of its key.
    @inlinable
    static func decode(_ value: DBusValue?, default defaultValue: Value) -> (value: Value, mismatch: SettingsError?) {
        guard let value else { return (Value.settingRepresentation.absentValue ?? defaultValue, nil) }
        do {
            return (try Value.settingRepresentation.decode(value), nil)
        } catch {
            return (defaultValue, error)
        }
    }

    /// The D-Bus type the key registers: the representation's, else the default value's.
    ///
    /// - Throws: `InvalidValue` when neither is known (an optional Codable key whose default is nil).
    ///
    /// Package access: ``schema()`` and the tests use it.
    package func dbusType() throws(SettingsError) -> DBusType {
        if let type = Value.settingRepresentation.dbusType { return type }
        if let encoded = try Value.settingRepresentation.encode(defaultValue) { return encoded.type }
        throw .invalidValue(
            "the D-Bus type of \(path) cannot be known: \(Value.self) has no fixed type and the default is nil")
    }

    /// The schema the key registers.
    ///
    /// An optional key whose default is nil registers a schema without a default: the key has no value until
    /// one is set.
    ///
    /// - Throws: `InvalidValue` when the type or the default cannot be encoded, or the type cannot be known
    ///   (an optional Codable key whose default is nil).
    public func schema() throws(SettingsError) -> SettingSchema {
        let type = try dbusType()
        let encodedDefault = try Value.settingRepresentation.encode(defaultValue)
        var encodedChoices: [DBusValue]?
        if let choices {
            var values: [DBusValue] = []
            for choice in choices {
                if let encoded = try Value.settingRepresentation.encode(choice) { values.append(encoded) }
            }
            encodedChoices = values
        }
        return SettingSchema(
            type: type, defaultValue: encodedDefault, summary: summary, description: description,
            range: range, choices: encodedChoices,
            isSecret: isSecret)
    }
}
