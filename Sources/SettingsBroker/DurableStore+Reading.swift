// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

// Reading: everything here reads the committed state only, under its lock, from any thread.
extension DurableStore {
    /// The effective value: a user value of the registered type, else the registered default.
    func effectiveValue(_ key: SettingPath) -> DBusValue? {
        committed.withLock { $0.effectiveValue(key) }
    }

    /// The effective value of a key, secret or not.
    ///
    /// Like ``get(_:includingSecret:)``, callable from any thread.
    ///
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has neither a user value nor a default.
    func get(_ key: SettingPath) throws(SettingsError) -> DBusValue {
        try get(key, includingSecret: true)!
    }

    /// The effective values of several keys, secret or not (keys without one are left out), and the serial
    /// they were read at.
    func getMany(_ keys: [SettingPath]) -> (values: [String: DBusValue], serial: UInt64) {
        let (values, serial, _) = getMany(keys, includingSecrets: true)
        return (values, serial)
    }

    /// Every key with an effective value below a directory, secret or not, and the current serial.
    func readTree(_ directory: SettingDirectory) -> (values: [String: DBusValue], serial: UInt64) {
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
    func get(_ key: SettingPath, includingSecret: Bool) throws(SettingsError) -> DBusValue? {
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
    func getMany(
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

    /// Every key with an effective value below a directory, and the serial they were read at; a secret key's
    /// value only when `includingSecrets` is true, else it is left out and `withheld` is true.
    ///
    /// Read in pieces of ``readPiece`` keys, each under the lock (see ``readInPieces(_:_:)``), so that a large
    /// directory does not hold up `Get`s meanwhile; the reply is the directory as of one serial all the same.
    ///
    /// With `schemaDefaults` false, a key that reads its schema's default (no value of the user or the
    /// administrator is served) is left out, as `ReadTreeWithoutSchemaDefaults` reads.
    func readTree(
        _ directory: SettingDirectory, includingSecrets: Bool, schemaDefaults: Bool = true
    ) -> (values: [String: DBusValue], serial: UInt64, withheld: Bool) {
        var result: [String: DBusValue] = [:]
        var withheld = false
        let serial = readInPieces(directory) { state, resume, limit in
            if resume == nil {
                result.removeAll(keepingCapacity: true)
                withheld = false
            }
            return state.forEachKey(in: directory, after: resume, limit: limit) { key, user, schema in
                if let schema, schema.isSecret, !includingSecrets {
                    withheld = true
                } else {
                    // Made once: making a path hashes its text.
                    let path = SettingPath(unchecked: key)
                    if let value = state.effectiveValue(user, schema, key: path),
                        schemaDefaults || state.source(of: path, user: user, schema: schema, effective: value) != .schema
                    {
                        result[key] = value
                    }
                }
            }
        }
        // Keys that have nothing but an administrator's default.
        committed.withLock { state in
            for (key, entry) in state.administrator.defaults where directory.contains(key) && result[key.rawValue] == nil {
                let schema = state.schemas[key]
                if let schema, schema.isSecret, !includingSecrets {
                    withheld = true
                } else if state.userValue(key) == nil, schema == nil {
                    result[key.rawValue] = entry.value
                }
            }
        }
        return (result, serial, withheld)
    }

    /// The values below a directory by whose they are (`ReadTreeLayers`), and the serial they were read at:
    /// `user` holds each key whose user value is served (not held back by a lock, of its schema's type),
    /// `administrator` each administrator's default that its key's schema accepts, whether or not a user value
    /// is served over it. Secret keys as in ``readTree(_:includingSecrets:schemaDefaults:)``; read in pieces
    /// like it.
    func readTreeLayers(_ directory: SettingDirectory, includingSecrets: Bool) -> (
        user: [String: DBusValue], administrator: [String: DBusValue], serial: UInt64, withheld: Bool
    ) {
        var user: [String: DBusValue] = [:]
        var withheld = false
        let serial = readInPieces(directory) { state, resume, limit in
            if resume == nil {
                user.removeAll(keepingCapacity: true)
                withheld = false
            }
            return state.forEachKey(in: directory, after: resume, limit: limit) { key, userValue, schema in
                if let schema, schema.isSecret, !includingSecrets {
                    withheld = true
                    return
                }
                let path = SettingPath(unchecked: key)
                if let value = state.effectiveValue(userValue, schema, key: path),
                    state.source(of: path, user: userValue, schema: schema, effective: value) == .user
                {
                    user[key] = value
                }
            }
        }
        var administrator: [String: DBusValue] = [:]
        committed.withLock { state in
            for (key, entry) in state.administrator.defaults where directory.contains(key) {
                let schema = state.schemas[key]
                if let schema, schema.isSecret, !includingSecrets {
                    withheld = true
                } else if let value = SettingsRules.administratorDefault(entry.value, under: schema) {
                    administrator[key.rawValue] = value
                }
            }
        }
        return (user, administrator, serial, withheld)
    }

    /// The direct children of a directory: key names, and subdirectory names ending in `/`, sorted.
    ///
    /// A subdirectory is passed over with one search, whatever it holds; read in pieces like ``readTree(_:)``.
    /// A key that has nothing but an administrator's default is listed too, as `ReadTree` reads it.
    /// The administrator's locks that hold keys under `directory` (``AdministratorLayer/locks(under:)``).
    func locks(under directory: SettingDirectory) -> [SettingLocation] {
        committed.withLock { $0.administrator }.locks(under: directory)
    }

    func list(_ directory: SettingDirectory) -> [String] {
        var names: [String] = []
        var administratorNames: Set<String> = []
        _ = readInPieces(directory) { state, resume, limit in
            if resume == nil { names.removeAll(keepingCapacity: true) }
            let next = state.forEachChild(of: directory, after: resume, limit: limit) { names.append($0) }
            if next == nil { administratorNames = state.administrator.children(of: directory) }
            return next
        }
        guard !administratorNames.isEmpty else { return names }
        administratorNames.formUnion(names)
        return administratorNames.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// The most keys (or children) a directory read takes under one hold of the lock: about 0.1 ms of work.
    static let readPiece = 512

    /// Reads a directory in pieces: `piece` reads up to `limit` entries after `resume` (nil for the start; the
    /// piece starts afresh then) and returns where the next piece starts, nil at the end. Returns the serial the
    /// whole read holds for.
    ///
    /// Each piece takes the lock once. If commits happened between two pieces, the read goes on only if none of
    /// them touched the directory (``CommittedState/recentChanges``): what was read then holds at the newer
    /// serial as well. Otherwise it starts again, and after three such restarts it reads the rest of the
    /// directory in one hold of the lock, so that a directory written without pause is still read.
    func readInPieces(
        _ directory: SettingDirectory,
        _ piece: (CommittedState, _ resume: ReadResume?, _ limit: Int) -> ReadResume?
    ) -> UInt64 {
        var restarts = 0
        var serial: UInt64?
        var resume: ReadResume?
        while true {
            let outcome: (next: ReadResume?, done: Bool) = committed.withLock { state in
                if let read = serial, state.serial != read,
                    state.recentChanges.touched(directory, after: read)
                {
                    restarts += 1
                    resume = nil
                }
                serial = state.serial
                let next = piece(state, resume, restarts >= 3 ? .max : Self.readPiece)
                return (next, next == nil)
            }
            if outcome.done { return serial! }
            resume = outcome.next
        }
    }

    /// What is known of a key: its schema, user value and effective value.
    ///
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has no user value, no schema, and nothing of the
    ///   administrator's (a default or a lock: a locked key is described as not writable, so that a client that
    ///   knows its keys from elsewhere, such as a GSettings schema, learns that it is locked).
    func describe(_ key: SettingPath) throws(SettingsError) -> KeyDescription {
        let (schema, user, effective, administrator) = committed.withLock { state in
            (state.schemas[key], state.userValue(key), state.effectiveValue(key), state.administrator)
        }
        let adminDefault = administrator.defaults[key]
        let lock = administrator.lock(of: key)
        guard schema != nil || user != nil || adminDefault != nil || lock != nil else {
            throw .unknownKey("\(key) has no value and no registered schema")
        }
        var description = KeyDescription(
            key: key, schema: schema, userValue: user?.value, effectiveValue: effective,
            lastChange: user?.serial ?? lastResetSerial(of: key), writable: lock == nil)
        description.lock = lock
        description.administratorDefault = adminDefault?.value
        description.source = CommittedState.source(
            of: key, user: user, schema: schema, effective: effective, administrator: administrator)
        return description
    }
}

/// Where a directory read goes on: after a key, or at the first key not before a text.
struct ReadResume: Equatable {
    var text: String
    var inclusive: Bool
}

/// The committed values, schemas and serial of a ``DurableStore``.
///
/// It sits behind a lock so that reads from memory (`Get`, `GetMany`) can be answered on the connection's
/// thread, without a task and the two thread wake-ups one costs; the store's commits are its only writer and
/// mutate it in place, so no copy of the tables is ever made.
///
/// A large commit is applied to `values` in pieces, each under the lock (see `DurableStore.commitToMemory`);
/// meanwhile `applying` holds the user values its keys had before it, and every read goes through it
/// (``userValue(_:)``, the directory reads), so that readers see the state before the commit until it is
/// applied whole and `serial` moves on.
struct CommittedState {
    typealias UserValue = ValueTable.UserValue

    /// The user values; read them through ``userValue(_:)``, which sees a commit being applied.
    var values: ValueTable
    var schemas: SchemaTable
    /// The administrator's defaults and locks (``AdministratorFiles``), changed by a commit of its own.
    var administrator = AdministratorLayer()
    /// The serial of the last commit.
    var serial: UInt64
    /// Where the latest commits changed something, so that a directory read in pieces can tell whether one
    /// touched it between two pieces.
    var recentChanges = RecentChanges()
    /// A large commit being applied to `values` in pieces, nil otherwise.
    var applying: Applying?

    /// The user values that the keys of a commit being applied had before it.
    struct Applying {
        /// Each key the commit writes, with its user value before it (nil: none).
        var before: [SettingPath: UserValue?]
        /// The keys in `before` that had a user value, in order.
        var keysBefore: SortedKeys
    }

    init(values: ValueTable, schemas: [SettingPath: SettingSchema], serial: UInt64) {
        self.values = values
        self.schemas = SchemaTable(schemas)
        self.serial = serial
    }

    /// The user value of a key, as of `serial`.
    func userValue(_ key: SettingPath) -> UserValue? {
        if let applying, let before = applying.before[key] { return before }
        return values[key]
    }

    /// The effective value: a user value of the registered type, else the registered default; under the
    /// administrator's layer when there is one (``SettingsRules/effectiveValue(_:_:key:administrator:)``).
    func effectiveValue(_ key: SettingPath) -> DBusValue? {
        effectiveValue(userValue(key), schemas[key], key: key)
    }

    /// The effective value of a key with this user value and schema, under the administrator's layer.
    func effectiveValue(_ user: UserValue?, _ schema: SettingSchema?, key: SettingPath) -> DBusValue? {
        if administrator.isEmpty { return Self.effectiveValue(user, schema) }
        return SettingsRules.effectiveValue(user, schema, key: key, administrator: administrator)
    }

    /// Where the effective value `effective` of a key with this user value and schema comes from.
    func source(
        of key: SettingPath, user: UserValue?, schema: SettingSchema?, effective: DBusValue?
    ) -> KeyDescription.Source {
        Self.source(of: key, user: user, schema: schema, effective: effective, administrator: administrator)
    }

    /// Where an effective value comes from: the user's value when it is served (the key is not locked and reads
    /// it), else the administrator's default when one is served, else the schema's default.
    static func source(
        of key: SettingPath, user: UserValue?, schema: SettingSchema?, effective: DBusValue?,
        administrator: AdministratorLayer
    ) -> KeyDescription.Source {
        guard let effective else { return .none }
        if let user, effective == user.value, administrator.isEmpty || administrator.lock(of: key) == nil {
            return .user
        }
        if !administrator.isEmpty,
            let adminDefault = administrator.defaults[key],
            SettingsRules.administratorDefault(adminDefault.value, under: schema) != nil
        {
            return .administrator
        }
        return .schema
    }

    /// The effective value of a key with this user value and schema (``SettingsRules/effectiveValue(_:_:)``).
    static func effectiveValue(_ user: UserValue?, _ schema: SettingSchema?) -> DBusValue? {
        SettingsRules.effectiveValue(user, schema)
    }

    /// The effective value, or nil and `withheld` when the key is secret and `includingSecret` is false; one
    /// lookup of the schema serves both.
    func effectiveValue(_ key: SettingPath, includingSecret: Bool) -> (value: DBusValue?, withheld: Bool) {
        let schema = schemas[key]
        if let schema, schema.isSecret, !includingSecret { return (nil, true) }
        return (effectiveValue(userValue(key), schema, key: key), false)
    }

    /// The key orders a directory read walks: user values, schemas, and the keys a commit being applied
    /// may have removed already.
    private var keyOrders: [SortedKeys] {
        [values.order, schemas.order] + (applying.map { [$0.keysBefore] } ?? [])
    }

    /// Calls `body` with each key below `directory` that has a user value or a schema, in order, starting
    /// after `resume`, for at most `limit` keys; returns where to go on, or nil when the directory is done.
    func forEachKey(
        in directory: SettingDirectory, after resume: ReadResume?, limit: Int,
        _ body: (String, UserValue?, SettingSchema?) -> Void
    ) -> ReadResume? {
        let upper = Self.upperBound(of: directory)
        let orders = keyOrders
        var cursor = KeyCursor(orders, from: resume ?? ReadResume(text: directory.rawValue, inclusive: true))
        var taken = 0
        while let key = cursor.current(orders), key < upper {
            if taken == limit { return ReadResume(text: key, inclusive: true) }
            let path = SettingPath(unchecked: key)
            let user = userValue(path), schema = schemas[path]
            // A key that a commit being applied adds is not there yet.
            if user != nil || schema != nil {
                body(key, user, schema)
                taken += 1
            }
            cursor.advance(past: key, orders)
        }
        return nil
    }

    /// Calls `body` with each key below `directory` that has a user value, and the value, in order, starting
    /// after `resume`, for at most `limit` keys or until `body` returns false; returns where to go on, or nil
    /// when the directory is done or `body` returned false.
    func forEachValue(
        in directory: SettingDirectory, after resume: ReadResume?, limit: Int,
        _ body: (SettingPath, UserValue) -> Bool
    ) -> ReadResume? {
        let upper = Self.upperBound(of: directory)
        let orders = [values.order] + (applying.map { [$0.keysBefore] } ?? [])
        var cursor = KeyCursor(orders, from: resume ?? ReadResume(text: directory.rawValue, inclusive: true))
        var taken = 0
        while let key = cursor.current(orders), key < upper {
            if taken == limit { return ReadResume(text: key, inclusive: true) }
            let path = SettingPath(unchecked: key)
            if let user = userValue(path) {
                guard body(path, user) else { return nil }
                taken += 1
            }
            cursor.advance(past: key, orders)
        }
        return nil
    }

    /// Calls `body` with each key below `directory` that has a user value, in order, starting after `resume`,
    /// for at most `limit` keys; returns where to go on, or nil when the directory is done. Like
    /// ``forEachValue(in:after:limit:_:)`` without looking the values up, unless a commit is being applied.
    func forEachKeyWithValue(
        in directory: SettingDirectory, after resume: ReadResume?, limit: Int, _ body: (SettingPath) -> Void
    ) -> ReadResume? {
        guard applying == nil else {
            return forEachValue(in: directory, after: resume, limit: limit) { key, _ in
                body(key)
                return true
            }
        }
        let upper = Self.upperBound(of: directory)
        let order = values.order
        var index = resume.map { $0.inclusive ? order.firstIndex(notBefore: $0.text) : order.firstIndex(after: $0.text) }
            ?? order.firstIndex(notBefore: directory.rawValue)
        var taken = 0
        while index != order.endIndex {
            let key = order[index]
            guard key < upper else { return nil }
            if taken == limit { return ReadResume(text: key, inclusive: true) }
            body(SettingPath(unchecked: key))
            taken += 1
            index = order.index(after: index)
        }
        return nil
    }

    /// Calls `body` with the name of each direct child of `directory` (a key's name, a subdirectory's name and
    /// `/`), in order, starting after `resume`, for at most `limit` children; returns where to go on, or nil
    /// when the directory is done. A subdirectory is passed over with one search, whatever it holds.
    func forEachChild(
        of directory: SettingDirectory, after resume: ReadResume?, limit: Int, _ body: (String) -> Void
    ) -> ReadResume? {
        let prefix = directory.rawValue
        let upper = Self.upperBound(of: directory)
        let orders = keyOrders
        var cursor = KeyCursor(orders, from: resume ?? ReadResume(text: prefix, inclusive: true))
        var taken = 0
        while let key = cursor.current(orders), key < upper {
            if taken == limit { return ReadResume(text: key, inclusive: true) }
            if applying != nil {
                // A key that a commit being applied adds is not there yet.
                let path = SettingPath(unchecked: key)
                if userValue(path) == nil, schemas[path] == nil {
                    cursor.advance(past: key, orders)
                    continue
                }
            }
            let child = directory.childName(holding: key)
            body(child)
            if child.hasSuffix("/") {
                // Everything below `prefix + name + "/"` sorts before `prefix + name + "0"`.
                cursor = KeyCursor(orders, from: ReadResume(text: prefix + child.dropLast() + "0", inclusive: true))
            } else {
                cursor.advance(past: key, orders)
            }
            taken += 1
        }
        return nil
    }

    /// The first text after every key below `directory`: `/a/b0` for `/a/b/`, since `0` follows `/`.
    static func upperBound(of directory: SettingDirectory) -> String {
        String(directory.rawValue.dropLast()) + "0"
    }
}

/// A position in several key orders at once, whose current key is the smallest of theirs: their union in
/// order.
struct KeyCursor {
    private var positions: [SortedKeys.Index]

    init(_ orders: [SortedKeys], from resume: ReadResume) {
        positions = orders.map { resume.inclusive ? $0.firstIndex(notBefore: resume.text) : $0.firstIndex(after: resume.text) }
    }

    /// The current key, nil at the end of every order.
    func current(_ orders: [SortedKeys]) -> String? {
        var smallest: String?
        for (order, position) in zip(orders, positions) where position != order.endIndex {
            let key = order[position]
            if smallest.map({ key < $0 }) ?? true { smallest = key }
        }
        return smallest
    }

    /// Moves past `key`, the current key, in every order.
    mutating func advance(past key: String, _ orders: [SortedKeys]) {
        for (slot, order) in orders.enumerated() where positions[slot] != order.endIndex && order[positions[slot]] == key {
            positions[slot] = order.index(after: positions[slot])
        }
    }
}

/// Where the latest commits changed something: the serial and enclosing location of each of the last
/// ``capacity`` commits.
struct RecentChanges {
    private var entries: [(serial: UInt64, location: SettingLocation)] = []
    private var next = 0
    static let capacity = 64

    /// Records a commit.
    mutating func record(serial: UInt64, location: SettingLocation) {
        if entries.count < Self.capacity {
            entries.append((serial, location))
        } else {
            entries[next] = (serial, location)
            next = (next + 1) % Self.capacity
        }
    }

    /// Whether a commit after `serial` may have changed something in `directory`: true when one did, or when
    /// commits after `serial` are no longer all recorded.
    func touched(_ directory: SettingDirectory, after serial: UInt64) -> Bool {
        var oldestKept = UInt64.max
        for entry in entries {
            oldestKept = min(oldestKept, entry.serial)
            guard entry.serial > serial else { continue }
            switch entry.location {
            case .key(let key): if directory.contains(key) { return true }
            case .directory(let changed): if directory.contains(changed) || changed.contains(directory) { return true }
            }
        }
        // Every commit after `serial` must be here: the one right after it at least.
        return entries.isEmpty || oldestKept > serial + 1
    }
}

/// Everything `Describe` reports about a key.
struct KeyDescription: Sendable, Hashable {
    /// The key.
    var key: SettingPath
    /// The registered schema, if any.
    var schema: SettingSchema?
    /// The user value, if any (even one that does not fit the schema).
    var userValue: DBusValue?
    /// The value `Get` returns.
    var effectiveValue: DBusValue?
    /// The serial of the key's last change since start-up, if known.
    var lastChange: UInt64?
    /// Whether the key may be written.
    var writable: Bool
    /// The administrator's lock on the key, if any.
    var lock: AdministratorLayer.Source?
    /// The administrator's default for the key, if any.
    var administratorDefault: DBusValue?
    /// Where the effective value comes from.
    var source: Source = .none

    /// Where a key's effective value comes from.
    enum Source: String, Sendable, Hashable {
        /// The user's value.
        case user
        /// The administrator's default.
        case administrator
        /// The registered schema's default.
        case schema
        /// There is no value.
        case none
    }

    /// Whether a user value exists that does not have the registered type (so `Get` returns the default).
    var userValueIgnored: Bool {
        guard let schema, let userValue else { return false }
        return !schema.accepts(userValue)
    }
}
