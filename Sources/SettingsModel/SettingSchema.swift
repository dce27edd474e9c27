// SPDX-License-Identifier: Apache-2.0

public import DBus

/// What a key accepts: its type and default, and optionally a range or a list of choices.
///
/// A schema is registered once per key (`Register`) and persists in the broker; registering an identical
/// schema again does nothing, registering a different one is a ``SettingsError/Code/schemaConflict``. The
/// broker checks every write against the key's schema with ``validate(_:for:)``.
///
/// ```swift
/// let volume = SettingSchema(
///     defaultValue: .uint32(50), summary: "Output volume",
///     range: SettingRange(min: .uint32(0), max: .uint32(100)))
/// try volume.validate()                                        // the schema itself is sound
/// try volume.validate(.uint32(120), for: key)
/// // throws OutOfRange: value 120 is out of range 0…100 for /org/example/volume
/// ```
public struct SettingSchema: Sendable, Hashable {
    /// The type every value of the key has.
    public var type: DBusType
    /// The value the key has when no value is set; nil for a key without a default, which has no value until
    /// one is set.
    public var defaultValue: DBusValue?
    /// A one-line summary for people, such as "Output volume".
    public var summary: String?
    /// A longer description for people.
    public var description: String?
    /// The inclusive range of accepted values; only for numeric types.
    public var range: SettingRange?
    /// The only values accepted, when the key is an enumeration; for an array type, choices of its element type
    /// are what each element may be (a set of flags: `as` with string choices).
    public var choices: [DBusValue]?
    /// Whether the key's values are secret: the broker then leaves them out of `Changed` signals, which every
    /// process on the bus may receive, and clients read them with a method call instead, which the broker
    /// answers with the value only for root, its own user and the users of its `--secret-readers`.
    public var isSecret: Bool
    /// Whether the key is machine-local: its values never leave the machine when the broker syncs its
    /// directory with other machines (docs/sync.md).
    public var isMachineLocal: Bool = false

    /// Makes a schema.
    ///
    /// - Parameters:
    ///   - type: The key's type.
    ///   - defaultValue: The key's default, of that type; nil for none.
    ///   - summary: A one-line summary.
    ///   - description: A longer description.
    ///   - range: The inclusive range of accepted values, for numeric types.
    ///   - choices: The only values accepted.
    ///   - isSecret: Whether values are kept out of signals.
    ///   - isMachineLocal: Whether values stay on the machine when the broker syncs.
    public init(
        type: DBusType, defaultValue: DBusValue?, summary: String? = nil, description: String? = nil,
        range: SettingRange? = nil, choices: [DBusValue]? = nil, isSecret: Bool = false, isMachineLocal: Bool = false
    ) {
        self.type = type
        self.defaultValue = defaultValue
        self.summary = summary
        self.description = description
        self.range = range
        self.choices = choices
        self.isSecret = isSecret
        self.isMachineLocal = isMachineLocal
    }

    /// Makes a schema whose type is the default value's type.
    public init(
        defaultValue: DBusValue, summary: String? = nil, description: String? = nil,
        range: SettingRange? = nil, choices: [DBusValue]? = nil, isSecret: Bool = false, isMachineLocal: Bool = false
    ) {
        self.init(
            type: defaultValue.type, defaultValue: defaultValue, summary: summary, description: description,
            range: range, choices: choices, isSecret: isSecret, isMachineLocal: isMachineLocal)
    }
}
