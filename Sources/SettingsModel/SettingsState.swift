// SPDX-License-Identifier: Apache-2.0

public import DBus

/// The settings of a store in memory as one value, under ``SettingsRules``: user values, schemas, the serial
/// of each key's last change and the store's serial. No locks, no I/O: the in-memory store keeps one under a
/// lock, and tests check the rules on it directly.
///
/// ```swift
/// var state = SettingsState()
/// let commit = try state.commit(sets: [(key, .int32(3))])
/// state.effectiveValue(of: key)    // .int32(3)
/// ```
public struct SettingsState: Sendable, Hashable, SettingsRulesView {
    /// The user values.
    public private(set) var values: [SettingPath: DBusValue] = [:]
    /// The registered schemas.
    public private(set) var schemas: [SettingPath: SettingSchema] = [:]
    /// The serial of each key's last change, kept after a reset so that compare-and-set sees removals.
    public private(set) var changes: [SettingPath: UInt64] = [:]
    /// The serial of the last commit.
    public private(set) var serial: UInt64
    /// The serial the state's history starts at (see ``SettingsRulesView/baselineSerial``).
    public let baselineSerial: UInt64

    /// What one commit changed.
    public struct Commit: Sendable, Hashable {
        /// The commit's serial.
        public var serial: UInt64
        /// The keys whose effective value changed, in key order.
        public var changed: [SettingsRules.ChangedKey]
        /// The keys whose schema the commit registered, replaced or removed, in key order: what `Describe`
        /// answers for them changed.
        public var described: [SettingPath] = []
    }

    /// An empty state at `serial`, whose history starts there.
    public init(serial: UInt64 = 0) {
        self.serial = serial
        self.baselineSerial = serial
    }

    /// The effective value of a key (``SettingsRules/effectiveValue(_:_:)``).
    public func effectiveValue(of key: SettingPath) -> DBusValue? {
        SettingsRules.effectiveValue(values[key], schemas[key])
    }

    /// Every key below a directory with a user value or a schema.
    public func keys(under directory: SettingDirectory) -> Set<SettingPath> {
        Set(values.keys.filter(directory.contains)).union(schemas.keys.filter(directory.contains))
    }

    /// Checks a write by ``SettingsRules/resolve(sets:resets:registrations:unregistrations:replacing:ifSerial:in:)`` (and the
    /// limits of every value first) and commits it at the next serial.
    ///
    /// - Returns: What it changed; nil when it changes nothing (the serial stays).
    /// - Throws: ``SettingsError`` as `resolve` and `validateForStorage(at:)` do; nothing changes then.
    public mutating func commit(
        sets: [(key: SettingPath, value: DBusValue)] = [], resets: [SettingLocation] = [],
        registrations: [(key: SettingPath, schema: SettingSchema)] = [], unregistrations: [SettingPath] = [],
        replacing: Bool = false, ifSerial: UInt64? = nil
    ) throws(SettingsError) -> Commit? {
        for (key, value) in sets { try value.validateForStorage(at: key) }
        let resolution = try SettingsRules.resolve(
            sets: sets, resets: resets, registrations: registrations, unregistrations: unregistrations,
            replacing: replacing, ifSerial: ifSerial, in: self)
        guard !resolution.isEmpty else { return nil }
        serial += 1
        var changedKeys = resolution.writes.map(\.key)
        for (key, schema) in resolution.registrations {
            let before = effectiveValue(of: key)
            schemas[key] = schema
            if SettingsRules.registrationIsReported(before: before, after: effectiveValue(of: key)),
                !changedKeys.contains(key)
            {
                changedKeys.append(key)
            }
        }
        for key in resolution.unregistrations {
            // The default goes away, or a kept value the schema did not serve is served again.
            let before = effectiveValue(of: key)
            schemas[key] = nil
            if before != effectiveValue(of: key), !changedKeys.contains(key) { changedKeys.append(key) }
        }
        for (key, value) in resolution.writes {
            values[key] = value
            changes[key] = serial
        }
        let changed = changedKeys.sorted().map { key in
            SettingsRules.changedKey(key, effective: effectiveValue(of: key), schema: schemas[key])
        }
        return Commit(serial: serial, changed: changed, described: Set(resolution.registrations.map(\.key) + resolution.unregistrations).sorted())
    }

    // MARK: - SettingsRulesView

    public func schema(of key: SettingPath) -> SettingSchema? { schemas[key] }

    public func userValue(of key: SettingPath) -> DBusValue? { values[key] }

    public func lastChange(of key: SettingPath) -> UInt64? { changes[key] }

    public func userKeys(under directory: SettingDirectory) -> [SettingPath] {
        values.keys.filter(directory.contains).sorted()
    }

    public func change(under directory: SettingDirectory, after serial: UInt64) -> SettingsRules.KeyChange? {
        let changed = changes.filter { directory.contains($0.key) && $0.value > serial }
        guard let key = changed.keys.min() else { return nil }
        return SettingsRules.KeyChange(key: key, serial: changed[key]!, wasReset: values[key] == nil)
    }
}

