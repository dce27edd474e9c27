// SPDX-License-Identifier: Apache-2.0

import DBus
public import SettingsModel
import SyncProtocol

/// Changes pulled from other machines, applied as one commit (``Changeset/remote``).
struct RemoteChanges: Sendable {
    /// The version of each key the commit writes.
    var versions: [SettingPath: SyncVersion]
    /// The database revision the commit moves the cursor to, in the same transaction.
    var cursor: Int64?
    /// The store's serial when the local versions these changes were compared with were read (after the clock
    /// observed them): a key written here after that serial has a newer version than theirs, and the commit
    /// leaves it alone. The check is made when the commit is validated, so no local write can come between it
    /// and the commit.
    var checkedSerial: UInt64?

    /// Makes the remote part of a changeset.
    init(versions: [SettingPath: SyncVersion], cursor: Int64?, checkedSerial: UInt64? = nil) {
        self.versions = versions
        self.cursor = cursor
        self.checkedSerial = checkedSerial
    }
}

// The store's hook for sync across machines: with sync on, each commit's writes of synced keys are queued in
// the store's `sync_outbox` in the commit's own transaction (StorePersistence+Sync.swift), with a version from
// the clock; a commit of remote changes records their versions and queues nothing. A registration that makes a
// synced key secret drops its queued change and, when a value of it may be in the database, queues a reset. With sync off, a commit
// reads one lock and nothing more.
extension DurableStore {
    /// The origin of commits of changes pulled from another machine: `sync:<machine name>`.
    static func syncOrigin(machineName: String) -> String { "sync:\(machineName)" }

    /// Turns sync on: from now on, commits queue the writes of keys `settings` syncs.
    func enableSync(_ settings: SyncSettings) {
        syncSettings.withLock { $0 = settings }
    }

    /// The clock of a local commit's version, read when it is validated, under the `writer` lock (nil when
    /// sync is off): a commit validated after the sync engine compared versions has a newer one than
    /// anything the engine had seen then (``RemoteChanges/checkedSerial``).
    func localSyncClock() -> UInt64? {
        syncSettings.withLock { $0 }?.clock.tick()
    }

    /// A remote changeset without the keys written here since its versions were compared with the local ones
    /// (``RemoteChanges/checkedSerial``): those writes are newer, and win; and without the keys this machine
    /// does not sync (outside its synced directories, or secret or machine-local in the schemas staged here):
    /// the engine refuses those already, and the store keeps to it however a remote changeset was made.
    func droppingKeysWrittenSince(_ changeset: Changeset, in view: StagedView) -> Changeset {
        guard let remote = changeset.remote else { return changeset }
        let settings = syncSettings.withLock { $0 }
        func dropped(_ key: SettingPath) -> Bool {
            if let settings, !settings.syncs(key, schema: view.schema(of: key)) { return true }
            guard let checked = remote.checkedSerial else { return false }
            return (view.lastChange(of: key) ?? 0) > checked
        }
        var kept = changeset
        kept.sets.removeAll { dropped($0.key) }
        kept.resets.removeAll { location in
            if case .key(let key) = location { return dropped(key) }
            return false
        }
        return kept
    }

    /// The view a changeset is resolved in: for remote changes, the store's view without the administrator's
    /// locks, so that a remote value of a locked key is stored as the user value, which the lock keeps from
    /// being served until it is lifted (as a user value written before the lock is kept); for any other
    /// changeset the view itself.
    func rulesView(for changeset: Changeset, _ view: StagedView) -> RemoteRulesView {
        RemoteRulesView(view: view, ignoresLocks: changeset.remote != nil)
    }

    /// What a batch queues and records for sync; nil when sync is off or there is nothing.
    func syncRecord(for batch: Batch) -> SyncRecord? {
        guard let settings = syncSettings.withLock({ $0 }) else { return nil }
        var record = SyncRecord()
        // Schemas registered earlier in the batch are not committed yet: they count for later changesets.
        var registered: [SettingPath: SettingSchema?] = [:]
        for (changeset, _) in batch {
            if let remote = changeset.remote {
                for (key, _) in changeset.writes {
                    if let version = remote.versions[key] { record.versions.append((key, version)) }
                }
                if let cursor = remote.cursor { record.cursor = max(record.cursor ?? cursor, cursor) }
            }
            for (key, schema) in changeset.registrations {
                let before = registered[key] ?? committed.withLock { $0.schemas[key] }
                registered[key] = schema
                if settings.directories.contains(where: { $0.contains(key) }), !settings.syncs(key, schema: schema) {
                    record.unqueued.append(key)
                    // Made secret: the value the database may have of it is replaced by a reset (a tombstone).
                    if schema.isSecret, before?.isSecret != true {
                        let version = SyncVersion(clock: settings.clock.tick(), machine: settings.machine)
                        record.tombstones.append(SyncChange(key: key, value: nil, version: version))
                    }
                }
            }
            for key in changeset.unregistrations { registered[key] = .some(nil) }
            guard changeset.remote == nil, !changeset.writes.isEmpty else { continue }
            var synced: [(key: SettingPath, value: DBusValue?)] = []
            Self.forEachPiece(of: changeset.writes) { piece in
                let candidates = piece.filter { write in settings.directories.contains { $0.contains(write.key) } }
                guard !candidates.isEmpty else { return }
                let schemas = committed.withLock { state in candidates.map { state.schemas[$0.key] } }
                for (write, committedSchema) in zip(candidates, schemas) {
                    let schema = registered[write.key] ?? committedSchema
                    if settings.syncs(write.key, schema: schema) { synced.append(write) }
                }
            }
            guard !synced.isEmpty else { continue }
            // One version for the whole commit: of two commits touching the same keys, one wins on all of them.
            // Its clock was read when the commit was validated (``localSyncClock()``).
            let version = SyncVersion(clock: changeset.syncClock ?? settings.clock.tick(), machine: settings.machine)
            for write in synced {
                record.queued.append(SyncChange(key: write.key, value: write.value, version: version))
                record.versions.append((write.key, version))
            }
        }
        return record.isEmpty ? nil : record
    }

    /// The oldest changes queued for the database, at most `limit`.
    func queuedSyncChanges(limit: Int) async throws -> [SyncChange] {
        try await queuedSyncChanges(limit: limit, bytes: .max, stop: { false }) ?? []
    }

    /// The most text of queued changes one use of the store's connection copies (but at least one row): a
    /// local commit waits for no more than that behind the sync process's `Take`.
    static let syncReadSlice = 1 << 20

    /// The oldest changes queued for the database, at most `limit` and `bytes` of keys and values (at least
    /// one change), oldest first; nil when `stop` answers true, which it is asked before each slice.
    ///
    /// The queue is read in slices of about ``syncReadSlice`` of text, each one short use of the store's
    /// connection, and the values are parsed outside it: local commits go on between the slices. A key
    /// written again meanwhile is taken once, with its newer change. Rows that cannot be read are dropped
    /// from the queue (only a damaged row is unreadable).
    func queuedSyncChanges(limit: Int, bytes budget: Int, stop: @Sendable () -> Bool) async throws -> [SyncChange]? {
        var changes: [SyncChange] = []
        var sizes: [Int] = []
        var indices: [SettingPath: Int] = [:]
        var bytes = 0
        var after: QueuedRow.Position?
        var sliceRows = 1
        reading: while changes.count < limit {
            if stop() { return nil }
            let asked = min(sliceRows, limit - changes.count)
            let rows = try await persistence.queuedRows(after: after, limit: asked)
            guard let last = rows.last else { break }
            after = last.position
            // The next slice: as many rows as about fill it, judging by this one.
            let copied = rows.reduce(0) { $0 + $1.textBytes }
            sliceRows =
                copied > Self.syncReadSlice ? max(1, rows.count * Self.syncReadSlice / copied) : min(sliceRows * 2, 256)
            var unreadable: [QueuedRow] = []
            var full = false
            for row in rows {
                let change: SyncChange
                do { change = try StorePersistence.change(from: row) } catch {
                    unreadable.append(row)
                    continue
                }
                let size = change.key.rawValue.utf8.count + (change.value?.approximateSize ?? 0)
                if let earlier = indices[change.key] {
                    // Written again while the queue was read: the newer change, in the older one's place.
                    bytes += size - sizes[earlier]
                    changes[earlier] = change
                    sizes[earlier] = size
                    continue
                }
                if size > budget - bytes && !changes.isEmpty {
                    full = true
                    break
                }
                indices[change.key] = changes.count
                changes.append(change)
                sizes.append(size)
                bytes += size
            }
            try await persistence.dropQueued(unreadable)
            if full || rows.count < asked { break reading }
        }
        return changes
    }

    /// The number of changes queued for the database.
    func queuedSyncCount() async throws -> Int {
        try await persistence.queuedCount()
    }

    /// Removes changes the database has taken from the queue (unless a newer write of the key replaced them),
    /// and records the versions the database gave them (a clamped clock) where the key's version is still theirs;
    /// moves the cursor to `cursor` in the same transaction.
    func acknowledgeSyncChanges(_ pushed: [SyncChange], as versions: [SyncVersion], cursor: Int64?) async throws {
        try await persistence.acknowledge(pushed, as: versions, cursor: cursor)
    }

    /// Queues changes of values already in the store (a machine joining), unless the key has a queued change
    /// or a version already.
    func queueForSync(_ changes: [SyncChange]) async throws {
        try await persistence.queue(changes)
    }

    /// The recorded versions of keys.
    func syncVersions(of keys: [SettingPath]) async throws -> [SettingPath: SyncVersion] {
        try await persistence.versions(of: keys)
    }

    /// A value the sync engine keeps in the store (`cursor`, `joined`), nil when unset.
    func syncState(_ name: String) async throws -> Int64? {
        try await persistence.syncStateInteger(name)
    }

    /// Sets a value the sync engine keeps in the store; `unsynced`, the write is not fsynced on its own (a
    /// cursor, which pulls the same rows again when lost).
    func setSyncState(_ name: String, _ value: Int64, unsynced: Bool = false) async throws {
        try await persistence.setSyncStateInteger(name, value, unsynced: unsynced)
    }

    /// The largest clock of a recorded version.
    func largestSyncClock() async throws -> UInt64 {
        try await persistence.largestRecordedClock()
    }

    /// The user values of keys under `directory` whose values sync, read in pieces (the values a machine
    /// brings when it joins).
    func syncedUserValues(under directories: [SettingDirectory], settings: SyncSettings) -> [(SettingPath, DBusValue)] {
        var found: [(SettingPath, DBusValue)] = []
        for directory in directories {
            var resume: ReadResume?
            repeat {
                resume = committed.withLock { state in
                    state.forEachValue(in: directory, after: resume, limit: Self.readPiece) { key, user in
                        if settings.syncs(key, schema: state.schemas[key]) { found.append((key, user.value)) }
                        return true
                    }
                }
            } while resume != nil
        }
        return found
    }

    /// The schema registered for a key, if any.
    func registeredSchema(of key: SettingPath) -> SettingSchema? {
        committed.withLock { $0.schemas[key] }
    }

    /// The path of the store file's copy taken before sync began.
    var beforeSyncCopyPath: String { path + ".before-sync" }

    /// Copies the store aside as ``beforeSyncCopyPath`` (a checked copy, as the backup is), unless a copy is
    /// there already.
    func copyBeforeSync() async throws {
        try await persistence.copy(to: beforeSyncCopyPath)
    }
}

extension DurableStore {
    /// Puts back the store as it was before sync began (`settings-broker --sync-restore`), with no broker
    /// running on it: the current store is moved aside as `<store>.synced-<time>` (with its log), and the copy
    /// taken when sync was first turned on takes its place.
    ///
    /// - Returns: where the current store went.
    /// - Throws: ``SettingsError`` `StoreFailure` when a broker holds the store, there is no copy, or a file
    ///   cannot be moved.
    public static func restoreBeforeSync(storePath path: String) throws(SettingsError) -> String {
        let copy = path + ".before-sync"
        guard StoreFiles.exists(copy) else {
            throw .storeFailure("there is no copy of \(path) from before sync began (\(copy))")
        }
        let lock: StoreLock
        do throws(StoreLock.Failure) {
            lock = try StoreLock.acquire(store: path)
        } catch {
            if case .held(let pid) = error {
                throw .storeFailure(
                    "the settings store \(path) is in use by a settings-broker\(pid.map { " (pid \($0))" } ?? ""): stop it first")
            }
            throw .storeFailure("cannot lock the settings store \(path)")
        }
        defer { lock.release() }
        do throws(StoreFiles.Failure) {
            let aside = "\(path).synced-\(StoreFiles.timestamp())"
            if StoreFiles.exists(path) { try StoreFiles.rename(path, to: aside) }
            for suffix in ["-wal", "-shm"] where StoreFiles.exists(path + suffix) {
                try StoreFiles.rename(path + suffix, to: aside + suffix)
            }
            try StoreFiles.copy(copy, to: path)
            StoreFiles.syncDirectory(of: path)
            return aside
        } catch {
            throw .storeFailure("cannot put back \(copy): \(error)")
        }
    }
}

/// A store's view for resolving a changeset, with the administrator's locks left out for remote changes
/// (``DurableStore/rulesView(for:_:)``): everything else is the view's.
struct RemoteRulesView: SettingsRulesView {
    let view: StagedView
    let ignoresLocks: Bool

    var baselineSerial: UInt64 { view.baselineSerial }
    var administrator: AdministratorLayer { ignoresLocks ? AdministratorLayer() : view.administrator }
    func schema(of key: SettingPath) -> SettingSchema? { view.schema(of: key) }
    func userValue(of key: SettingPath) -> DBusValue? { view.userValue(of: key) }
    func lastChange(of key: SettingPath) -> UInt64? { view.lastChange(of: key) }
    func userKeys(under directory: SettingDirectory) -> [SettingPath] { view.userKeys(under: directory) }
    func change(under directory: SettingDirectory, after serial: UInt64) -> SettingsRules.KeyChange? {
        view.change(under: directory, after: serial)
    }
}
