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

    /// Reads the `a{sv}` that the broker's `Describe` returns.
    ///
    /// - Throws: `InvalidValue` when the reply is not a dictionary of the documented fields.
    package init(key: SettingPath, describeReply reply: DBusValue) throws(SettingsError) {
        guard case .dictionary(.string, .variant, let entries) = reply else {
            throw .invalidValue("Describe returned '\(reply.type)', not a{sv}")
        }
        var fields: [String: DBusValue] = [:]
        for entry in entries {
            if case .string(let name) = entry.key, case .variant(let value) = entry.value { fields[name] = value }
        }
        var schema: SettingSchema?
        if case .boolean(true)? = fields["registered"], let defaultValue = fields["default"] {
            var registered = SettingSchema(defaultValue: defaultValue)
            if case .string(let text)? = fields["summary"] { registered.summary = text }
            if case .string(let text)? = fields["description"] { registered.description = text }
            if case .structure(let bounds)? = fields["range"], bounds.count == 2 {
                registered.range = SettingRange(min: bounds[0], max: bounds[1])
            }
            if case .array(_, let choices)? = fields["choices"] { registered.choices = choices }
            if case .boolean(let secret)? = fields["secret"] { registered.isSecret = secret }
            schema = registered
        }
        var type: DBusType?
        if case .string(let text)? = fields["signature"] { type = try? DBusType(parsing: text) }
        var serial: UInt64?
        if case .uint64(let number)? = fields["serial"] { serial = number }
        var problem: String?
        if case .string(let text)? = fields["value-ignored"] { problem = text }
        var writable = true
        if case .boolean(let flag)? = fields["writable"] { writable = flag }
        self.init(
            key: key, schema: schema, userValue: fields["value"], type: type, isWritable: writable, serial: serial,
            problem: problem)
    }
}
