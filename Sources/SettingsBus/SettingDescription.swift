// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

/// What a store knows about a key: its schema, user value and whether it can be written.
public struct SettingDescription: Sendable, Hashable {
    /// The key.
    public var key: SettingPath
    /// The registered schema, if any.
    public var schema: SettingSchema?
    /// The user value, if any and if the key is not secret.
    public var userValue: DBusValue?
    /// The D-Bus type of the key: the registered one, else the user value's.
    public var type: DBusType?
    /// Whether the key can be written.
    public var isWritable: Bool
    /// The serial of the key's last change, when the store knows it.
    public var serial: UInt64?
    /// Why the stored value is not used (its type is not the registered one, or not the key's Swift type):
    /// the key then reads its default.
    public var problem: String?
    /// The administrator's lock on the key (`FILE, line N`), when an administrator locked it: it is then not
    /// writable, by anyone.
    public var lock: String?
    /// The administrator's default for the key, if any (over the schema's).
    public var administratorDefault: DBusValue?
    /// Where the value a read returns comes from: `user`, `administrator`, `schema` or `none`; nil when the
    /// store does not say (an in-memory store has no administrator's layer).
    public var source: String?

    /// Makes a description.
    public init(
        key: SettingPath, schema: SettingSchema?, userValue: DBusValue?, type: DBusType?, isWritable: Bool,
        serial: UInt64?, problem: String?
    ) {
        self.key = key
        self.schema = schema
        self.userValue = userValue
        self.type = type
        self.isWritable = isWritable
        self.serial = serial
        self.problem = problem
    }

    /// The description in the broker's `Describe` reply.
    package init(key: SettingPath, reply: Settings1.DescribeReply) {
        self.init(
            key: key, schema: reply.schema, userValue: reply.value, type: reply.signature, isWritable: reply.writable,
            serial: reply.serial, problem: reply.valueIgnored)
        lock = reply.locked
        administratorDefault = reply.administratorDefault
        source = reply.source
    }
}
