// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

// Reading: everything here reads the committed state only, under its lock, from any thread.
extension SettingsStore {
    /// The effective value: a user value of the registered type, else the registered default.
    func effectiveValue(_ key: SettingPath) -> DBusValue? {
        committed.withLock { $0.effectiveValue(key) }
    }

    /// The effective value of a key, secret or not.
    ///
    /// Like ``get(_:includingSecret:)``, callable from any thread.
    ///
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has neither a user value nor a default.
    public func get(_ key: SettingPath) throws(SettingsError) -> DBusValue {
        try get(key, includingSecret: true)!
    }

    /// The effective values of several keys, secret or not (keys without one are left out), and the serial
    /// they were read at.
    public func getMany(_ keys: [SettingPath]) -> (values: [String: DBusValue], serial: UInt64) {
        let (values, serial, _) = getMany(keys, includingSecrets: true)
        return (values, serial)
    }

    /// Every key with an effective value below a directory, secret or not, and the current serial.
    public func readTree(_ directory: SettingDirectory) -> (values: [String: DBusValue], serial: UInt64) {
        let (values, serial, _) = readTree(directory, includingSecrets: true)
        return (values, serial)
    }

    /// The effective value of a key, unless it is secret and `includingSecret` is false.
    ///
    /// Reads only the committed state, under its lock, so it may be called from any thread without waiting
    /// for a commit (the interface answers `Get` on the connection's thread). Whether the key is secret comes
    /// from the same lookup of its schema as its default.
    ///
    /// - Returns: The value; nil when the key is secret and `includingSecret` is false (its value withheld).
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has neither a user value nor a default.
    public func get(_ key: SettingPath, includingSecret: Bool) throws(SettingsError) -> DBusValue? {
        let (value, withheld) = committed.withLock { $0.effectiveValue(key, includingSecret: includingSecret) }
        if withheld { return nil }
        guard let value else {
            throw .unknownKey("\(key) has no value and no registered default")
        }
        return value
    }

    /// The effective values of several keys (keys without one are left out) and the serial they were read at;
    /// a secret key's value only when `includingSecrets` is true, else it is left out and listed in `withheld`.
    ///
    /// Like ``get(_:includingSecret:)``, callable from any thread.
    public func getMany(
        _ keys: [SettingPath], includingSecrets: Bool
    ) -> (values: [String: DBusValue], serial: UInt64, withheld: [SettingPath]) {
        committed.withLock { state in
            var result: [String: DBusValue] = [:]
            var withheld: [SettingPath] = []
            for key in keys {
                let (value, secret) = state.effectiveValue(key, includingSecret: includingSecrets)
                if let value { result[key.rawValue] = value } else if secret { withheld.append(key) }
            }
            return (result, state.serial, withheld)
        }
    }

    /// Every key with an effective value below a directory, and the current serial; a secret key's value only
    /// when `includingSecrets` is true, else it is left out and `withheld` is true.
    public func readTree(
        _ directory: SettingDirectory, includingSecrets: Bool
    ) -> (values: [String: DBusValue], serial: UInt64, withheld: Bool) {
        committed.withLock { state in
            var result: [String: DBusValue] = [:]
            var withheld = false
            for key in state.values.keys where directory.contains(key) {
                let (value, secret) = state.effectiveValue(key, includingSecret: includingSecrets)
                result[key.rawValue] = value
                withheld = withheld || secret
            }
            for (key, schema) in state.schemas where directory.contains(key) && result[key.rawValue] == nil {
                if schema.isSecret && !includingSecrets {
                    withheld = true
                } else {
                    result[key.rawValue] = schema.defaultValue
                }
            }
            return (result, state.serial, withheld)
        }
    }

    /// The direct children of a directory: key names, and subdirectory names ending in `/`, sorted.
    public func list(_ directory: SettingDirectory) -> [String] {
        var names = Set<String>()
        let prefixLength = directory.rawValue.utf8.count
        func add(_ key: SettingPath) {
            guard directory.contains(key) else { return }
            let rest = key.rawValue.utf8.dropFirst(prefixLength)
            if let slash = rest.firstIndex(of: UInt8(ascii: "/")) {
                names.insert(String(decoding: rest[..<slash], as: UTF8.self) + "/")
            } else {
                names.insert(String(decoding: rest, as: UTF8.self))
            }
        }
        committed.withLock { state in
            for key in state.values.keys { add(key) }
            for key in state.schemas.keys { add(key) }
        }
        return names.sorted()
    }

    /// What is known of a key: its schema, user value and effective value.
    ///
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has neither a user value nor a schema.
    public func describe(_ key: SettingPath) throws(SettingsError) -> KeyDescription {
        let (schema, user, effective) = committed.withLock { state in
            (state.schemas[key], state.values[key], state.effectiveValue(key))
        }
        guard schema != nil || user != nil else {
            throw .unknownKey("\(key) has no value and no registered schema")
        }
        return KeyDescription(
            key: key, schema: schema, userValue: user?.value, effectiveValue: effective,
            lastChange: user?.serial ?? lastResetSerial(of: key), writable: true)
    }
}

/// The committed values, schemas and serial of a ``SettingsStore``.
///
/// It sits behind a lock so that reads from memory (`Get`, `GetMany`) can be answered on the connection's
/// thread, without a task and the two thread wake-ups one costs; the store's commits are its only writer and
/// mutate it in place, so no copy of the dictionaries is ever made.
struct CommittedState {
    typealias UserValue = ValueTable.UserValue

    var values: ValueTable
    var schemas: [SettingPath: SettingSchema]
    /// The serial of the last commit.
    var serial: UInt64

    /// The effective value: a user value of the registered type, else the registered default.
    func effectiveValue(_ key: SettingPath) -> DBusValue? {
        let schema = schemas[key]
        if let user = values[key], schema == nil || schema!.type == user.type { return user.value }
        return schema?.defaultValue
    }

    /// The effective value, or nil and `withheld` when the key is secret and `includingSecret` is false; one
    /// lookup of the schema serves both.
    func effectiveValue(_ key: SettingPath, includingSecret: Bool) -> (value: DBusValue?, withheld: Bool) {
        let schema = schemas[key]
        if let schema, schema.isSecret, !includingSecret { return (nil, true) }
        if let user = values[key], schema == nil || schema!.type == user.type { return (user.value, false) }
        return (schema?.defaultValue, false)
    }
}

/// Everything `Describe` reports about a key.
public struct KeyDescription: Sendable, Hashable {
    /// The key.
    public var key: SettingPath
    /// The registered schema, if any.
    public var schema: SettingSchema?
    /// The user value, if any (even one that does not fit the schema).
    public var userValue: DBusValue?
    /// The value `Get` returns.
    public var effectiveValue: DBusValue?
    /// The serial of the key's last change since start-up, if known.
    public var lastChange: UInt64?
    /// Whether the key may be written.
    public var writable: Bool

    /// Whether a user value exists that does not have the registered type (so `Get` returns the default).
    public var userValueIgnored: Bool {
        guard let schema, let userValue else { return false }
        return schema.type != userValue.type
    }
}
