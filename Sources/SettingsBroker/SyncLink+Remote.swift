// SPDX-License-Identifier: Apache-2.0

import DBus
import Logging
import SettingsModel
import SyncProtocol

// The store's answers to the sync process: the join, the queue, and the remote changes, decided here.
extension SyncLink {
    /// The first sync of this store: a copy aside for `--sync-restore`, then this machine's user values of
    /// synced keys queued with the join's version (they win over older remote values, lose to newer ones).
    /// Returns how many were queued; a store that joined already queues nothing.
    func join(_ writes: WritePath) async throws -> Int {
        let store = writes.store
        guard try await store.syncState("joined") == nil else { return 0 }
        try await store.copyBeforeSync()
        let settings = SyncSettings(directories: configuration.directories, machine: configuration.machineID, clock: clock)
        let values = store.syncedUserValues(under: configuration.directories, settings: settings)
        if !values.isEmpty {
            let version = SyncVersion(clock: clock.tick(), machine: configuration.machineID)
            try await store.queueForSync(values.map { SyncChange(key: $0.0, value: $0.1, version: version) })
        }
        try await store.setSyncState("joined", Int64(HybridLogicalClock.wallClock() >> 16))
        let queued = try await store.queuedSyncCount()
        state.withLock { $0.queued = queued }
        logger.info(
            "sync: joined; the store as it was is kept for --sync-restore",
            metadata: ["copy": "\(store.beforeSyncCopyPath)", "queued": "\(values.count)"])
        return values.count
    }

    /// The oldest queued changes, at most `limit` and about ``SyncCall/batchBytes`` of values (at least one),
    /// read in slices between which local commits go on (``DurableStore/queuedSyncChanges(limit:bytes:stop:)``);
    /// nothing more is read once `channel` closed.
    func take(limit: Int, _ writes: WritePath, for channel: MessageChannel) async throws -> [SyncChange] {
        try await writes.store.queuedSyncChanges(
            limit: max(1, limit), bytes: SyncCall.batchBytes, stop: { channel.closedReason != nil }) ?? []
    }

    /// Removes changes the database took from the queue, with the versions it gave them, and moves the cursor
    /// to `cursor` in the same transaction (the push was the only change after it). A version may only be the
    /// change's own or one the database clamped (an older clock of the same machine).
    func acknowledge(_ pushed: [DBusValue], _ versions: [DBusValue], cursor: Int64?, _ writes: WritePath) async throws {
        let store = writes.store
        var changes: [SyncChange] = []
        var given: [SyncVersion] = []
        for (change, version) in zip(pushed, versions) {
            let change = try SyncChange(channelValue: change)
            guard case .structure(let fields) = version, fields.count == 2, case .uint64(let clock) = fields[0],
                case .string(let machine) = fields[1],
                machine == change.version.machine, clock <= change.version.clock
            else {
                throw SyncCall.badArguments(
                    SyncCall.acknowledge, "a version is (ts), the change's own or an older clock of its machine")
            }
            changes.append(change)
            given.append(SyncVersion(clock: clock, machine: machine))
        }
        try await store.acknowledgeSyncChanges(changes, as: given, cursor: cursor)
        let queued = try await store.queuedSyncCount()
        state.withLock { state in
            state.queued = queued
            if let cursor { state.cursor = cursor }
        }
    }

    /// How far ahead of this machine's clock a remote version may be: the sync process refuses versions
    /// ahead of the database's clock by more than the bound; this bounds what reaches the store whatever it
    /// sends (a clock at its largest would leave a key that can never change again).
    static let furthestAhead: UInt64 = (24 * 3600 * 1000) << 16

    /// Why this machine does not take a remote change, nil when it does: it takes exactly what it would push
    /// itself (a key under its synced directories, neither secret nor machine-local here), with a version
    /// within a day of its own clock.
    func notSyncedHere(_ change: SyncChange, _ store: DurableStore) -> String? {
        guard configuration.directories.contains(where: { $0.contains(change.key) }) else {
            return "the key is outside the directories this machine syncs"
        }
        let (ahead, overflow) = clock.now().addingReportingOverflow(Self.furthestAhead)
        if !overflow, change.version.clock > ahead {
            return "its clock (\(change.version.milliseconds) ms) is more than a day ahead of this machine's"
        }
        guard let schema = store.registeredSchema(of: change.key) else { return nil }
        if schema.isSecret { return "the key is secret on this machine, which never syncs it" }
        if schema.isMachineLocal { return "the key is machine-local on this machine, which never syncs it" }
        return nil
    }

    /// Applies pulled rows: one commit per run of rows from one machine, each moving the cursor; the rows the
    /// sync process refused (it cannot read them) are listed, and the cursor moves past them.
    ///
    /// The order matters: the clock observes the rows first, so that any local commit validated after
    /// `checked` has a newer version than theirs; the store's commits up to `checked` have their versions in
    /// `local`; a key written after `checked` is left alone by the commit itself (``RemoteChanges/checkedSerial``).
    func apply(_ rows: [RemoteRow], refused: [RefusedRow], upTo last: Int64, _ writes: WritePath) async throws {
        let store = writes.store
        if let first = refused.first {
            logger.warning(
                "sync: rows of the database cannot be applied here and are skipped",
                metadata: [
                    "count": "\(refused.count)", "key": "\(first.key)", "machine": "\(first.machineName)",
                    "error": "\(first.reason)",
                ])
            for row in refused { noteRefused(key: row.key, machine: row.machineName, reason: row.reason) }
        }
        let rows = rows.filter { row in
            guard let reason = notSyncedHere(row.change, store) else { return true }
            noteRefused(key: row.change.key.rawValue, machine: row.machineName, reason: reason, log: true)
            return false
        }
        if let newest = rows.map(\.change.version.clock).max() { clock.observe(newest) }
        let checked = store.serial
        let local = try await store.syncVersions(of: rows.map(\.change.key))
        // The newest row of each key (a key appears once per pull, but be sure).
        var newer: [RemoteRow] = []
        var seen: Set<SettingPath> = []
        for row in rows.reversed() where seen.insert(row.change.key).inserted {
            if let mine = local[row.change.key], !(mine < row.change.version) { continue }
            newer.append(row)
        }
        newer.sort { $0.revision < $1.revision }
        var start = 0
        while start < newer.count {
            var end = start + 1
            while end < newer.count && newer[end].machineName == newer[start].machineName { end += 1 }
            let run = Array(newer[start..<end])
            // A run moves the cursor past the revisions before the next run's first row (a batch may end
            // inside a revision, so `last` may be lower).
            try await commit(run, cursor: end == newer.count ? last : min(last, newer[end].revision - 1), checked: checked, writes)
            start = end
        }
        // Also when the last commit had nothing left to write (its keys were all written here meanwhile) or
        // its last change was refused.
        try await store.setSyncState("cursor", last, unsynced: true)
        state.withLock { $0.cursor = last }
    }

    /// Commits a run of remote changes as one changeset; when the store refuses it (a value its schema
    /// refuses, a locked key), commits them one by one and skips the refused ones, with a log line each (the
    /// cursor then moves with the last change committed, and ``apply(_:refused:upTo:_:)`` sets it past the
    /// run).
    private func commit(_ run: [RemoteRow], cursor: Int64, checked: UInt64, _ writes: WritePath) async throws {
        let origin = DurableStore.syncOrigin(machineName: run[0].machineName)
        func changeset(_ rows: ArraySlice<RemoteRow>, cursor: Int64?) -> Changeset {
            var changeset = Changeset(origin: origin)
            for row in rows {
                if let value = row.change.value {
                    changeset.sets.append((row.change.key, value))
                } else {
                    changeset.resets.append(.key(row.change.key))
                }
            }
            changeset.remote = RemoteChanges(
                versions: Dictionary(rows.map { ($0.change.key, $0.change.version) }, uniquingKeysWith: { a, _ in a }),
                cursor: cursor, checkedSerial: checked)
            return changeset
        }
        do {
            _ = try await writes.apply(changeset(run[...], cursor: cursor))
            noteApplied(run.map(\.change.key))
        } catch {
            guard error.code != .storeFailure else { throw error }
            for index in run.indices {
                do {
                    _ = try await writes.apply(changeset(run[index...index], cursor: index == run.count - 1 ? cursor : nil))
                    noteApplied([run[index].change.key])
                } catch {
                    guard error.code != .storeFailure else { throw error }
                    noteRefused(
                        key: run[index].change.key.rawValue, machine: run[index].machineName, reason: error.message,
                        log: true)
                }
            }
        }
    }

    /// The most refused changes `Status` lists.
    static let refusedShown = 20

    /// A remote change this machine refused: listed by `Status` (`sync-refused`, at most ``refusedShown``, the
    /// latest) until a later change of the key is applied; logged when `log` (a page of refused rows is logged
    /// once, by its caller).
    private func noteRefused(key: String, machine: String, reason: String, log: Bool = false) {
        let key = LineText.excerpt(key, limit: 300)
        let machine = LineText.excerpt(machine, limit: 200)
        let reason = LineText.excerpt(reason, limit: 500)
        if log {
            logger.warning(
                "sync: a remote change is refused by this machine and not applied",
                metadata: ["key": "\(key)", "machine": "\(machine)", "error": "\(reason)"])
        }
        let text = "\(key) from \(machine): \(reason)"
        state.withLock { state in
            state.refused.removeAll { $0.key == key }
            state.refused.append((key, text))
            if state.refused.count > Self.refusedShown { state.refused.removeFirst(state.refused.count - Self.refusedShown) }
        }
    }

    /// Remote changes applied: a refusal of their keys is over.
    private func noteApplied(_ keys: [SettingPath]) {
        state.withLock { state in
            guard !state.refused.isEmpty else { return }
            let applied = Set(keys.map(\.rawValue))
            state.refused.removeAll { applied.contains($0.key) }
        }
    }
}
