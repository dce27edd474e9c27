// SPDX-License-Identifier: Apache-2.0

public import DBus

/// A user value as a store keeps it: the value, and its type, which a store may read without making the value.
public protocol StoredSettingValue {
    /// The value.
    var value: DBusValue { get }
    /// The value's type.
    var type: DBusType { get }
}

extension DBusValue: StoredSettingValue {
    /// The value itself.
    public var value: DBusValue { self }
}

/// What a store knows when it checks a write: each key's schema, user value and last change, as of the
/// writes accepted so far.
///
/// The broker's store answers from its sorted, chunked tables (read a piece at a time, with the writes staged
/// for its next commit laid over them); ``SettingsState`` answers from dictionaries. The rules are functions
/// over this protocol rather than over one value type because the broker's tables are laid out for 100,000
/// keys and read in pieces under a lock (`Get`s wait on it); copying them into one value type, or making them
/// one, would cost every write at that size.
public protocol SettingsRulesView {
    /// The registered schema of a key.
    func schema(of key: SettingPath) -> SettingSchema?
    /// The user value of a key.
    func userValue(of key: SettingPath) -> DBusValue?
    /// The serial of the key's last change (a value stored or removed), nil when it did not change since
    /// ``baselineSerial``.
    func lastChange(of key: SettingPath) -> UInt64?
    /// The keys below a directory that have a user value, in order.
    func userKeys(under directory: SettingDirectory) -> [SettingPath]
    /// A key below a directory that changed after `serial`, nil when none did since ``baselineSerial``.
    func change(under directory: SettingDirectory, after serial: UInt64) -> SettingsRules.KeyChange?
    /// The serial the store's history starts at: a key that did not change since counts as changed at it.
    var baselineSerial: UInt64 { get }
    /// The administrator's defaults and locks (``AdministratorLayer``); none unless the store has them.
    var administrator: AdministratorLayer { get }
}

extension SettingsRulesView {
    /// No administrator's layer.
    public var administrator: AdministratorLayer { AdministratorLayer() }
}

/// The rules of the settings model, shared by the broker's store and the in-memory store: which value a key
/// serves, which writes are accepted and what they store, compare-and-set, registration with schema evolution,
/// and what a commit reports.
public enum SettingsRules {
    // MARK: - Values

    /// The effective value of a key with this user value and schema: the user value when the schema accepts it
    /// (its type, range and choices; ``SettingSchema/accepts(_:)``), else the default; the user value when no
    /// schema is registered.
    @inlinable
    public static func effectiveValue(_ user: (some StoredSettingValue)?, _ schema: SettingSchema?) -> DBusValue? {
        guard let user else { return schema?.defaultValue }
        guard let schema else { return user.value }
        // The type is read first: a store may keep it apart from the value.
        guard schema.type == user.type else { return schema.defaultValue }
        if schema.range == nil && schema.choices == nil { return user.value }
        let value = user.value
        return schema.accepts(value) ? value : schema.defaultValue
    }

    /// The effective value of a key under the administrator's layer as well: a locked key reads the
    /// administrator's default, else the schema's (a user value it has is kept, not served); any other key its
    /// user value when the schema accepts it, else the administrator's default, else the schema's.
    ///
    /// An administrator's default is served when the schema accepts it, after a lossless conversion to the
    /// schema's type (an `int32` in a keyfile for an `x` key); one the schema refuses is not served.
    public static func effectiveValue(
        _ user: (some StoredSettingValue)?, _ schema: SettingSchema?, key: SettingPath,
        administrator: AdministratorLayer
    ) -> DBusValue? {
        if administrator.isEmpty { return effectiveValue(user, schema) }
        let adminDefault = administrator.defaults[key].flatMap { administratorDefault($0.value, under: schema) }
        let fallback = adminDefault ?? schema?.defaultValue
        if administrator.lock(of: key) != nil { return fallback }
        guard let user else { return fallback }
        guard let schema else { return user.value }
        guard schema.type == user.type else { return fallback }
        let value = user.value
        return schema.accepts(value) ? value : fallback
    }

    /// An administrator's default as a schema serves it: converted without loss to the schema's type, and
    /// accepted by the schema; nil when it is not served.
    public static func administratorDefault(_ value: DBusValue, under schema: SettingSchema?) -> DBusValue? {
        guard let schema else { return value }
        let converted = value.type == schema.type ? value : value.losslesslyConverted(to: schema.type)
        guard let converted, schema.accepts(converted) else { return nil }
        return converted
    }

    /// Refuses a write of a key the administrator locked, naming the lock's file and line.
    ///
    /// - Throws: ``SettingsError`` `NotWritable`.
    public static func checkWritable(_ key: SettingPath, _ administrator: AdministratorLayer) throws(SettingsError) {
        guard let lock = administrator.lock(of: key) else { return }
        throw .notWritable("\(key) is locked by the administrator (\(lock.file), line \(lock.line)): no one may change it")
    }

    /// The value a write stores under a schema: a value of a narrower type that converts without loss is
    /// stored as the registered type; then the schema checks it.
    ///
    /// Limits that hold for every key (`DBusValue.validateForStorage(at:)`) are the caller's to check
    /// first.
    ///
    /// - Throws: ``SettingsError`` `TypeMismatch` or `OutOfRange`.
    public static func storedValue(
        _ value: DBusValue, for key: SettingPath, schema: SettingSchema?
    ) throws(SettingsError) -> DBusValue {
        guard let schema else { return value }
        var value = value
        if value.type != schema.type, let converted = value.losslesslyConverted(to: schema.type) {
            value = converted
        }
        try schema.validate(value, for: key)
        return value
    }

    /// What a stored value becomes when a schema of another type is registered: converted in the same commit
    /// when that loses nothing and the schema accepts the result (an `i` that `dconf load` stored, registered
    /// as `x`); nil when it stays as it is.
    public static func conversion(of stored: DBusValue, to schema: SettingSchema) -> DBusValue? {
        guard stored.type != schema.type, let converted = stored.losslesslyConverted(to: schema.type),
            schema.accepts(converted)
        else { return nil }
        return converted
    }

    /// Whether registering `schema` over `existing` changes anything, by the rules of schema evolution:
    /// identical is no change, compatible is accepted, incompatible only when `replacing`.
    ///
    /// - Throws: ``SettingsError`` `InvalidSchema` for a schema that is not valid, `SchemaConflict` for an
    ///   incompatible one without `replacing`.
    public static func registrationChanges(
        _ schema: SettingSchema, over existing: SettingSchema?, for key: SettingPath, replacing: Bool
    ) throws(SettingsError) -> Bool {
        try schema.validate(for: key)
        guard let existing else { return true }
        return try !existing.checkEvolution(to: schema, for: key, replacing: replacing).isEmpty
    }

    // MARK: - Writes

    /// A change of a key found by compare-and-set.
    public struct KeyChange: Sendable, Hashable {
        /// The key.
        public var key: SettingPath
        /// The serial it changed at.
        public var serial: UInt64
        /// Whether the change removed its value.
        public var wasReset: Bool

        /// Makes a change.
        public init(key: SettingPath, serial: UInt64, wasReset: Bool) {
            self.key = key
            self.serial = serial
            self.wasReset = wasReset
        }
    }

    /// A write checked against a store: what it stores, in key order, and the schemas it registers.
    public struct Resolution: Sendable {
        /// The final user value of each key it changes (nil: removed), in key order.
        public var writes: [(key: SettingPath, value: DBusValue?)]
        /// The schemas it registers (those that change nothing are left out).
        public var registrations: [(key: SettingPath, schema: SettingSchema)]
        /// The keys whose schema it removes (`Unregister`), in order.
        public var unregistrations: [SettingPath] = []

        /// Whether it changes nothing.
        public var isEmpty: Bool { writes.isEmpty && registrations.isEmpty && unregistrations.isEmpty }
    }

    /// Checks a write against a store and says what it stores.
    ///
    /// Registrations come first (schema evolution; a stored value of another type is converted when that loses
    /// nothing), then resets (a directory resets each key below it that has a user value), then sets (a later
    /// entry for a key wins; each is converted and checked against the schema it will have). With `ifSerial`,
    /// the write is refused if a key it sets or resets, or any key below a directory it resets, changed after
    /// that serial; a key that did not change since the store's ``SettingsRulesView/baselineSerial`` counts as
    /// changed at it, and so does a directory when the baseline is after `ifSerial`.
    ///
    /// The limits of every value (`DBusValue.validateForStorage(at:)`) are the caller's to check first.
    ///
    /// `unregistrations` remove the schemas of keys (`Unregister`); a key's user value stays unless it is also
    /// reset. A key with neither a schema nor a user value cannot be unregistered.
    ///
    /// - Throws: ``SettingsError``: `InvalidSchema` and `SchemaConflict` for a registration, `UnknownKey` for
    ///   an unregistration of an unknown key, `TypeMismatch` and `OutOfRange` for a value, `Conflict` for a
    ///   failed compare-and-set. Nothing is changed then.
    public static func resolve(
        sets: [(key: SettingPath, value: DBusValue)], resets: [SettingLocation] = [],
        registrations requested: [(key: SettingPath, schema: SettingSchema)] = [],
        unregistrations unregistering: [SettingPath] = [], replacing: Bool = false,
        ifSerial: UInt64? = nil, in view: some SettingsRulesView
    ) throws(SettingsError) -> Resolution {
        var unregistrations: [SettingPath] = []
        for key in Set(unregistering).sorted() {
            if view.schema(of: key) != nil {
                unregistrations.append(key)
            } else if view.userValue(of: key) == nil {
                throw .unknownKey("\(key) has no registered schema and no value: there is nothing to unregister")
            }
        }
        var registrations: [(key: SettingPath, schema: SettingSchema)] = []
        var newSchemas: [SettingPath: SettingSchema] = [:]
        for (key, schema) in requested {
            guard try registrationChanges(schema, over: newSchemas[key] ?? view.schema(of: key), for: key, replacing: replacing)
            else { continue }
            newSchemas[key] = schema
            registrations.append((key, schema))
        }
        var writes: [SettingPath: DBusValue?] = [:]
        if !registrations.isEmpty {
            let setKeys = Set(sets.map(\.key))
            for (key, schema) in registrations where !setKeys.contains(key) {
                if let stored = view.userValue(of: key), let converted = conversion(of: stored, to: schema) {
                    writes[key] = .some(converted)
                }
            }
        }
        let administrator = view.administrator
        var touchedDirectories: [SettingDirectory] = []
        // A write that only resets one directory (a `Reset`) takes its keys in order as they are, without a
        // dictionary and a sort of 100,000 keys.
        var onlyDirectoryReset: [SettingPath]?
        for location in resets {
            switch location {
            case .key(let key):
                try checkWritable(key, administrator)
                if view.userValue(of: key) != nil { writes[key] = .some(nil) }
            case .directory(let directory):
                touchedDirectories.append(directory)
                let keys = view.userKeys(under: directory)
                if !administrator.locks.isEmpty {
                    for key in keys { try checkWritable(key, administrator) }
                }
                if resets.count == 1, sets.isEmpty, writes.isEmpty {
                    onlyDirectoryReset = keys
                } else {
                    for key in keys { writes[key] = .some(nil) }
                }
            }
        }
        for (key, value) in sets {
            try checkWritable(key, administrator)
            writes[key] = .some(try storedValue(value, for: key, schema: newSchemas[key] ?? view.schema(of: key)))
        }
        if let ifSerial {
            try checkUnchanged(
                keys: sets.map(\.key) + resets.compactMap(\.key), directories: touchedDirectories, after: ifSerial,
                in: view)
        }
        return Resolution(
            writes: onlyDirectoryReset?.map { ($0, nil) } ?? writes.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            registrations: registrations, unregistrations: unregistrations)
    }

    /// Compare-and-set: throws `Conflict` if one of `keys`, or a key below one of `directories`, changed after
    /// `serial`.
    public static func checkUnchanged(
        keys: [SettingPath], directories: [SettingDirectory], after serial: UInt64, in view: some SettingsRulesView
    ) throws(SettingsError) {
        for key in keys {
            let last = view.lastChange(of: key) ?? view.baselineSerial
            if last > serial { throw .conflict("\(key) changed at serial \(last), after serial \(serial)") }
        }
        for directory in directories {
            if view.baselineSerial > serial {
                throw .conflict(
                    "\(directory) may have changed after serial \(serial): the broker started at serial "
                        + "\(view.baselineSerial) and keeps no older history; read again and retry")
            }
            if let change = view.change(under: directory, after: serial) {
                throw .conflict(
                    "\(change.key) under \(directory) \(change.wasReset ? "was reset" : "changed") at serial "
                        + "\(change.serial), after serial \(serial)")
            }
        }
    }

    // MARK: - What a commit changed

    /// A key a commit changed, as watchers hear of it.
    public struct ChangedKey: Sendable, Hashable {
        /// The key.
        public var key: SettingPath
        /// Its new effective value; nil when it is left without any value.
        public var value: DBusValue?
        /// Whether its value is secret: the broker reports it without its value, so watchers read it again.
        public var isSecret: Bool

        /// Makes a changed key.
        public init(key: SettingPath, value: DBusValue?, isSecret: Bool) {
            self.key = key
            self.value = value
            self.isSecret = isSecret
        }
    }

    /// A key as a commit that changed it reports it, from its schema and effective value after the commit.
    @inlinable
    public static func changedKey(_ key: SettingPath, effective: DBusValue?, schema: SettingSchema?) -> ChangedKey {
        ChangedKey(key: key, value: effective, isSecret: schema?.isSecret == true)
    }

    /// Whether a key that a registration gave a new schema, and that the commit does not write, is reported as
    /// changed: when its effective value changed (a schema of another type than its user value makes it read
    /// the default). A default appearing for a key without any value is not: a client already shows its own
    /// default for an absent key, and would repeat it.
    public static func registrationIsReported(before: DBusValue?, after: DBusValue?) -> Bool {
        before != nil && after != before
    }
}

extension SettingLocation {
    /// The key, when the location is one.
    fileprivate var key: SettingPath? {
        if case .key(let key) = self { return key }
        return nil
    }
}
