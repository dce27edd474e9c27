// SPDX-License-Identifier: Apache-2.0

// Design note: how a write becomes durable.
//
// `apply` validates a changeset against the staged view (committed state overlaid with changesets accepted
// but not yet committed), gives it the next serial, stages it and suspends the writer. At most one SQLite
// transaction is in flight; changesets that arrive meanwhile accumulate and are written together by the next
// one (group commit: one fsync for many writers). When a transaction commits, its changesets are applied to
// the committed state in serial order, the commit handler is called (the D-Bus export emits one `Changed`
// signal per changeset) and only then are the writers answered. Reads see committed state only, so a value
// is never visible before it is durable. The committed state sits behind a lock, not only the actor, so that
// `Get` and `GetMany` can be answered on the connection's thread without a task (see `CommittedState`). If a transaction fails, every staged changeset fails with
// `StoreFailure` and nothing of it becomes visible. Costs do not depend on the store's size: a commit
// touches only the rows it changes.

public import DBus
public import SettingsModel

/// The broker's settings: values and schemas in memory for reads, persisted in SQLite with group commit.
public actor SettingsStore {
    typealias UserValue = CommittedState.UserValue

    /// The store file (its condition and backup are reported by `status()`).
    let persistence: StorePersistence
    /// Values, schemas and serial as of the last commit. The actor is its only writer, in `commitToMemory`.
    private let committed: Locked<CommittedState>
    /// Serials of resets, so compare-and-set sees a removal as a change.
    private var resetSerials: [SettingPath: UInt64] = [:]
    /// Keys unseen since start-up count as changed at this serial (resets before start-up are not kept).
    private let baselineSerial: UInt64
    /// The serial of the last commit.
    public var serial: UInt64 { committed.withLock { $0.serial } }
    private var nextSerial: UInt64

    private var stagedValues: [SettingPath: (value: DBusValue?, serial: UInt64)] = [:]
    private var stagedSchemas: [SettingPath: SettingSchema] = [:]
    private var accumulating: [(changeset: ResolvedChangeset, waiter: CheckedContinuation<UInt64, any Error>)] = []
    private var commitInFlight = false
    private var closed = false
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []
    private var commitHandler: @Sendable ([CommittedChange]) -> Void = { _ in }

    /// The store file.
    public nonisolated let path: String
    /// Rows of the store file that could not be read at start-up (kept untouched), with the reason.
    public nonisolated let unreadable: [(path: String, reason: String)]

    private init(persistence: StorePersistence, contents: StorePersistence.Contents) {
        self.persistence = persistence
        self.path = persistence.path
        self.nextSerial = contents.serial + 1
        self.baselineSerial = contents.serial
        self.unreadable = contents.unreadable
        self.committed = Locked(
            CommittedState(values: contents.values, schemas: contents.schemas, serial: contents.serial))
    }

    /// Opens the store file (creating it if needed) and reads it into memory.
    ///
    /// - Throws: ``SettingsError`` `StoreFailure` naming the file and the reason.
    public static func open(path: String, durability: Durability = .full) async throws(SettingsError) -> SettingsStore {
        let persistence = try StorePersistence(path: path, durability: durability)
        let contents = try await persistence.load()
        return SettingsStore(persistence: persistence, contents: contents)
    }

    /// Sets the function called, in serial order, with what each commit changed, before writers are answered.
    public func setCommitHandler(_ handler: @escaping @Sendable ([CommittedChange]) -> Void) {
        commitHandler = handler
    }

    /// The number of keys that have a user value.
    public var userValueCount: Int { committed.withLock { $0.values.count } }

    /// The number of registered schemas.
    public var schemaCount: Int { committed.withLock { $0.schemas.count } }

    // MARK: - Writing

    /// Validates a changeset and commits it atomically; returns its serial once it is durable.
    ///
    /// A changeset that changes nothing (it resets keys that have no user value and registers only schemas
    /// that are registered already) commits nothing and returns the current serial.
    ///
    /// - Throws: ``SettingsError``: `TypeMismatch`, `OutOfRange`, `InvalidValue`, `TooLarge` for a refused
    ///   value; `SchemaConflict`; `Conflict` for a failed compare-and-set; `StoreFailure` when the commit
    ///   fails. A refused changeset stores nothing.
    public func apply(_ changeset: Changeset) async throws(SettingsError) -> UInt64 {
        guard !closed else { throw .storeFailure("the broker is shutting down; retry in a moment") }
        let resolved = try resolve(changeset)
        guard !resolved.writes.isEmpty || !resolved.registrations.isEmpty else { return nextSerial - 1 }
        nextSerial += 1
        for write in resolved.writes {
            stagedValues[write.key] = (write.value, resolved.serial)
        }
        for registration in resolved.registrations {
            stagedSchemas[registration.key] = registration.schema
        }
        do {
            return try await withCheckedThrowingContinuation { waiter in
                accumulating.append((resolved, waiter))
                startCommitIfIdle()
            }
        } catch let error as SettingsError {
            throw error
        } catch {
            throw .storeFailure("the commit failed: \(error)")
        }
    }

    /// Refuses further writes and waits until every accepted changeset has been committed (or has failed).
    public func close() async {
        closed = true
        await flush()
    }

    /// Waits until every accepted changeset has been committed (or has failed).
    public func flush() async {
        guard commitInFlight || !accumulating.isEmpty else { return }
        await withCheckedContinuation { idleWaiters.append($0) }
    }

    private func resolve(_ changeset: Changeset) throws(SettingsError) -> ResolvedChangeset {
        var registrations: [(key: SettingPath, schema: SettingSchema)] = []
        var newSchemas: [SettingPath: SettingSchema] = [:]
        for (key, schema) in changeset.registrations {
            try schema.validate(for: key)
            if let existing = newSchemas[key] ?? currentSchema(key) {
                guard existing == schema else {
                    throw .schemaConflict(
                        "\(key) is already registered with type '\(existing.type)' and default "
                            + "\(GVariantText.format(existing.defaultValue)); a different registration "
                            + "(type '\(schema.type)', default \(GVariantText.format(schema.defaultValue))) "
                            + "was refused")
                }
                continue
            }
            newSchemas[key] = schema
            registrations.append((key, schema))
        }
        var writes: [SettingPath: DBusValue?] = [:]
        var touchedDirectories: [SettingDirectory] = []
        for location in changeset.resets {
            switch location {
            case .key(let key):
                if currentUserValue(key) != nil { writes[key] = .some(nil) }
            case .directory(let directory):
                touchedDirectories.append(directory)
                for key in userKeys(under: directory) { writes[key] = .some(nil) }
            }
        }
        for (key, value) in changeset.sets {
            try value.validateForStorage(at: key)
            if let schema = newSchemas[key] ?? currentSchema(key) {
                try schema.validate(value, for: key)
            }
            writes[key] = .some(value)
        }
        if let ifSerial = changeset.ifSerial {
            let setKeys = changeset.sets.map(\.key)
            let resetKeys = changeset.resets.compactMap { location -> SettingPath? in
                if case .key(let key) = location { return key }
                return nil
            }
            for key in setKeys + resetKeys where lastChange(of: key) > ifSerial {
                throw .conflict("\(key) changed at serial \(lastChange(of: key)), after serial \(ifSerial)")
            }
            for directory in touchedDirectories {
                if let reason = change(under: directory, after: ifSerial) { throw .conflict(reason) }
            }
        }
        return ResolvedChangeset(
            serial: nextSerial,
            writes: writes.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            registrations: registrations, origin: changeset.origin)
    }

    private func startCommitIfIdle() {
        guard !commitInFlight, !accumulating.isEmpty else { return }
        commitInFlight = true
        let batch = accumulating
        accumulating = []
        let persistence = self.persistence
        Task {
            let result: Result<Void, SettingsError>
            do throws(SettingsError) {
                try await persistence.commit(batch.map(\.changeset))
                result = .success(())
            } catch {
                result = .failure(error)
            }
            self.finishCommit(batch, result)
        }
    }

    private func finishCommit(
        _ batch: [(changeset: ResolvedChangeset, waiter: CheckedContinuation<UInt64, any Error>)],
        _ result: Result<Void, SettingsError>
    ) {
        commitInFlight = false
        switch result {
        case .success:
            var changes: [CommittedChange] = []
            for (changeset, _) in batch {
                if let change = commitToMemory(changeset) { changes.append(change) }
            }
            let last = serial
            stagedValues = stagedValues.filter { $0.value.serial > last }
            for (changeset, _) in batch {
                for registration in changeset.registrations where stagedSchemas[registration.key] == registration.schema {
                    stagedSchemas[registration.key] = nil
                }
            }
            commitHandler(changes)
            for (changeset, waiter) in batch { waiter.resume(returning: changeset.serial) }
        case .failure(let error):
            // Later changesets were validated on top of the failed ones: fail them too, and forget all staging.
            let pending = batch + accumulating
            accumulating = []
            stagedValues = [:]
            stagedSchemas = [:]
            nextSerial = serial + 1
            for (_, waiter) in pending { waiter.resume(throwing: error) }
        }
        if accumulating.isEmpty {
            let waiters = idleWaiters
            idleWaiters = []
            for waiter in waiters { waiter.resume() }
        } else {
            startCommitIfIdle()
        }
    }

    private func commitToMemory(_ changeset: ResolvedChangeset) -> CommittedChange? {
        for (key, value) in changeset.writes {
            resetSerials[key] = value == nil ? changeset.serial : nil
        }
        return committed.withLock { state in
            state.serial = changeset.serial
            var changedKeys = changeset.writes.map(\.key)
            for (key, schema) in changeset.registrations {
                // A schema of another type than the stored value's makes Get return the default instead:
                // watchers hear of that as of a write. A default appearing for a key without a value is not
                // announced: a client already shows its own default for an absent key, and would repeat it.
                let before = state.effectiveValue(key)
                state.schemas[key] = schema
                if before != nil, state.effectiveValue(key) != before, !changedKeys.contains(key) {
                    changedKeys.append(key)
                }
            }
            guard !changedKeys.isEmpty else { return nil }
            var change = CommittedChange(
                path: SettingLocation.enclosing(changedKeys) ?? .directory(.root), values: [:],
                removed: [], secretKeys: [], serial: changeset.serial, origin: changeset.origin)
            for (key, value) in changeset.writes {
                state.values[key] = value.map { UserValue(value: $0, serial: changeset.serial) }
            }
            for key in changedKeys {
                if state.schemas[key]?.isSecret == true {
                    change.secretKeys.append(key.rawValue)
                } else if let effective = state.effectiveValue(key) {
                    change.values[key.rawValue] = effective
                } else {
                    change.removed.append(key.rawValue)
                }
            }
            return change
        }
    }

    // MARK: - Staged view (for validation)

    private func currentSchema(_ key: SettingPath) -> SettingSchema? {
        stagedSchemas[key] ?? committed.withLock { $0.schemas[key] }
    }

    private func currentUserValue(_ key: SettingPath) -> DBusValue? {
        if let staged = stagedValues[key] { return staged.value }
        return committed.withLock { $0.values[key]?.value }
    }

    private func userKeys(under directory: SettingDirectory) -> [SettingPath] {
        var keys = Set(committed.withLock { $0.values.keys.filter { directory.contains($0) } })
        for (key, staged) in stagedValues where directory.contains(key) {
            if staged.value == nil { keys.remove(key) } else { keys.insert(key) }
        }
        return keys.sorted()
    }

    private func lastChange(of key: SettingPath) -> UInt64 {
        stagedValues[key]?.serial ?? committed.withLock { $0.values[key]?.serial } ?? resetSerials[key] ?? baselineSerial
    }

    /// Why a directory counts as changed after a serial, or nil if nothing below it changed.
    private func change(under directory: SettingDirectory, after ifSerial: UInt64) -> String? {
        if baselineSerial > ifSerial {
            return "\(directory) may have changed after serial \(ifSerial): the broker started at serial "
                + "\(baselineSerial) and keeps no older history; read again and retry"
        }
        for (key, staged) in stagedValues where directory.contains(key) && staged.serial > ifSerial {
            return "\(key) under \(directory) changed at serial \(staged.serial), after serial \(ifSerial)"
        }
        let changed = committed.withLock { state in
            state.values.first { key, user in directory.contains(key) && user.serial > ifSerial }
        }
        if let (key, user) = changed {
            return "\(key) under \(directory) changed at serial \(user.serial), after serial \(ifSerial)"
        }
        for (key, reset) in resetSerials where directory.contains(key) && reset > ifSerial {
            return "\(key) under \(directory) was reset at serial \(reset), after serial \(ifSerial)"
        }
        return nil
    }

    // MARK: - Reading (committed state)

    /// The effective value: a user value of the registered type, else the registered default.
    nonisolated func effectiveValue(_ key: SettingPath) -> DBusValue? {
        committed.withLock { $0.effectiveValue(key) }
    }

    /// The effective value of a key.
    ///
    /// Reads only the committed state, under its lock, so it may be called from any thread without waiting
    /// for the actor (the interface answers `Get` on the connection's thread).
    ///
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has neither a user value nor a default.
    public nonisolated func get(_ key: SettingPath) throws(SettingsError) -> DBusValue {
        guard let value = effectiveValue(key) else {
            throw .unknownKey("\(key) has no value and no registered default")
        }
        return value
    }

    /// The effective values of several keys (keys without one are left out) and the serial they were read at.
    ///
    /// Like ``get(_:)``, callable from any thread.
    public nonisolated func getMany(_ keys: [SettingPath]) -> (values: [String: DBusValue], serial: UInt64) {
        committed.withLock { state in
            var result: [String: DBusValue] = [:]
            for key in keys { if let value = state.effectiveValue(key) { result[key.rawValue] = value } }
            return (result, state.serial)
        }
    }

    /// Every key with an effective value below a directory, and the current serial.
    public func readTree(_ directory: SettingDirectory) -> (values: [String: DBusValue], serial: UInt64) {
        committed.withLock { state in
            var result: [String: DBusValue] = [:]
            for key in state.values.keys where directory.contains(key) {
                result[key.rawValue] = state.effectiveValue(key)
            }
            for key in state.schemas.keys where directory.contains(key) && result[key.rawValue] == nil {
                result[key.rawValue] = state.effectiveValue(key)
            }
            return (result, state.serial)
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
            lastChange: user?.serial ?? resetSerials[key], writable: true)
    }
}

/// The committed values, schemas and serial of a ``SettingsStore``.
///
/// It sits behind a lock so that reads from memory (`Get`, `GetMany`) can be answered on the connection's
/// thread, without a task and the two thread wake-ups one costs; the store's actor is its only writer and
/// mutates it in place, so no copy of the dictionaries is ever made.
struct CommittedState {
    struct UserValue {
        var value: DBusValue
        var serial: UInt64
    }

    var values: [SettingPath: UserValue]
    var schemas: [SettingPath: SettingSchema]
    /// The serial of the last commit.
    var serial: UInt64

    /// The effective value: a user value of the registered type, else the registered default.
    func effectiveValue(_ key: SettingPath) -> DBusValue? {
        let schema = schemas[key]
        if let user = values[key], schema == nil || schema!.type == user.value.type { return user.value }
        return schema?.defaultValue
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
