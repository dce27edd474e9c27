// SPDX-License-Identifier: Apache-2.0

import DBus
import Dispatch
import SettingsModel

// Committing: batches of staged changesets written to the store file, then applied to memory (see the design
// note in DurableStore.swift).
extension DurableStore {
    typealias Batch = [(changeset: ResolvedChangeset, waiter: WriteWaiter)]

    /// What one commit did: each writer's answer, with the waiter it was staged for, and what the `Changed` and
    /// `DescriptionChanged` signals report of it, in serial order. Sent by ``WritePath``, answers first.
    struct CommitOutcome {
        var answers: [(waiter: WriteWaiter, result: Result<UInt64, SettingsError>)]
        var changes: [CommittedChange]
    }

    /// Takes the accumulated changesets, or nil if there are none or they hold more than `limit` writes.
    func takeBatch(limit: Int?) -> Batch? {
        writer.withLock { state in
            guard !state.accumulating.isEmpty else { return nil }
            if let limit {
                var writes = 0
                for entry in state.accumulating {
                    writes += entry.changeset.writes.count + entry.changeset.registrations.count
                        + entry.changeset.unregistrations.count
                    if writes > limit { return nil }
                }
            }
            defer { state.accumulating = [] }
            return state.accumulating
        }
    }

    /// Ends the commits in flight if nothing has accumulated (and tells the waiters of ``flush()``); false if
    /// something has, which the caller then commits.
    func endCommitting() -> Bool {
        let waiters = writer.withLock { state in
            // A changeset accepted since the last batch was taken started no commit: it is this one's to take.
            guard state.accumulating.isEmpty else { return nil as [@Sendable () -> Void]? }
            state.commitInFlight = false
            defer { state.idleWaiters = [] }
            return state.idleWaiters
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter() }
        return true
    }

    /// Writes a batch to the store file and then to memory, and returns what it did; nil, with the batch put
    /// back first in line, when another program holds the store's lock and `waitingForLocks` is false.
    func commit(_ batch: Batch, waitingForLocks: Bool = true) -> CommitOutcome? {
        do throws(SettingsError) {
            let start = ContinuousClock.now
            let sync = syncRecord(for: batch)
            guard try persistence.commit(batch.map(\.changeset), sync: sync, waitingForLocks: waitingForLocks) else {
                writer.withLock { $0.accumulating = batch + $0.accumulating }
                return nil
            }
            // A reset queued for a key made secret wakes the sync process too: the database's value of it goes now.
            if let sync, !(sync.queued.isEmpty && sync.tombstones.isEmpty) { syncSettings.withLock { $0 }?.queued() }
            let changes = finishCommit(batch, took: ContinuousClock.now - start)
            return CommitOutcome(answers: batch.map { ($0.waiter, .success($0.changeset.serial)) }, changes: changes)
        } catch {
            return CommitOutcome(answers: failCommit(batch).map { ($0, .failure(error)) }, changes: [])
        }
    }

    /// Applies a written batch to memory and unstages it; returns what its commits changed.
    func finishCommit(_ batch: Batch, took duration: Duration) -> [CommittedChange] {
        var changes: [CommittedChange] = []
        if batch.reduce(0, { $0 + $1.changeset.writes.count }) <= Self.memoryPiece {
            writer.withLock { state in
                for (changeset, _) in batch {
                    state.resetSerials.record(changeset.writes, serial: changeset.serial)
                    if let change = commitToMemory(changeset) { changes.append(change) }
                }
                endCommit(batch, took: duration, unstagingValues: true, &state)
            }
        } else {
            // The `writer` lock is not held while a large batch is applied to memory: it would hold up every
            // writer (and the connection's thread, where `Set` is validated). Validation meanwhile still sees the
            // batch's writes staged, and they are unstaged only once the committed state shows them.
            for (changeset, _) in batch {
                Self.forEachPiece(of: changeset.writes) { piece in
                    writer.withLock { $0.resetSerials.record(piece, serial: changeset.serial) }
                }
                if let change = commitToMemory(changeset) { changes.append(change) }
            }
            // Unstaged in pieces first, for the same reason; what is left is done as for a small batch.
            let last = batch.last!.changeset.serial
            for (changeset, _) in batch {
                Self.forEachPiece(of: changeset.writes) { piece in
                    writer.withLock { state in
                        for (key, _) in piece where (state.stagedValues[key]?.serial ?? .max) <= last {
                            state.stagedValues[key] = nil
                        }
                    }
                }
            }
            writer.withLock { state in endCommit(batch, took: duration, unstagingValues: false, &state) }
        }
        return changes
    }

    /// Unstages what a batch wrote (its values unless `unstagingValues` is false: they were already), now
    /// that the committed state shows it.
    func endCommit(_ batch: Batch, took duration: Duration, unstagingValues: Bool, _ state: inout WriterState) {
        state.lastCommitWasSlow = duration > state.slowCommit
        let last = batch.last!.changeset.serial
        for (changeset, _) in batch {
            // A key written again by a later changeset, not yet committed, stays staged.
            for (key, _) in changeset.writes where unstagingValues && (state.stagedValues[key]?.serial ?? .max) <= last {
                state.stagedValues[key] = nil
            }
            for registration in changeset.registrations
            where state.stagedSchemas[registration.key] == .some(registration.schema) {
                state.stagedSchemas.removeValue(forKey: registration.key)
            }
            for key in changeset.unregistrations where state.stagedSchemas[key] == .some(nil) {
                state.stagedSchemas.removeValue(forKey: key)
            }
        }
    }

    /// A failed transaction: later changesets were validated on top of the failed ones, so they fail too, and
    /// all staging is forgotten. Returns the waiters of every changeset that failed.
    func failCommit(_ batch: Batch) -> [WriteWaiter] {
        writer.withLock { state in
            let pending = batch + state.accumulating
            state.accumulating = []
            state.stagedValues = [:]
            state.stagedSchemas = [:]
            state.nextSerial = committed.withLock { $0.serial } + 1
            return pending.map(\.waiter)
        }
    }

    /// The most keys a commit writes to memory under one hold of a lock; a larger commit is applied in pieces
    /// of this size (well under a millisecond of work on an idle machine, a few on a loaded one), so that it
    /// holds up `Get`s and writers for a piece at a time.
    static let memoryPiece = 1024

    /// Calls `body` with a commit's writes in pieces of ``memoryPiece``.
    static func forEachPiece<T>(of writes: [T], _ body: (ArraySlice<T>) -> Void) {
        var start = 0
        while start < writes.count {
            let end = min(start + memoryPiece, writes.count)
            body(writes[start..<end])
            start = end
        }
    }

    /// Applies a committed changeset to memory and returns what the `Changed` and `DescriptionChanged` signals
    /// report of it (nil when it changed neither a value nor a schema).
    ///
    /// Commits run one at a time, so nothing else changes the committed state meanwhile. A changeset of at most
    /// ``memoryPiece`` writes is applied under one hold of the `committed` lock. A larger one (a `Reset` of a
    /// directory of 100,000 keys, a large `Apply`) is applied in pieces: the user values its keys had are read
    /// first, in pieces, and put beside the table (`CommittedState.applying`), so that every read meanwhile
    /// sees the state before the commit; the writes then go into the table a piece at a time; and one short
    /// hold of the lock registers its schemas, moves the serial on and drops the old values, so that readers
    /// see the whole commit at once. What the signal reports is then read in pieces too.
    func commitToMemory(_ changeset: ResolvedChangeset) -> CommittedChange? {
        var changedKeys = changeset.writes.map(\.key)
        let written = SettingLocation.enclosing(changedKeys)
        let schemaKeys = changeset.registrations.map(\.key) + changeset.unregistrations
        let touched =
            schemaKeys.isEmpty && changeset.announced.isEmpty
            ? written : SettingLocation.enclosing(changedKeys + schemaKeys + changeset.announced)
        let large = changeset.writes.count > Self.memoryPiece
        if large {
            var before: [SettingPath: UserValue?] = [:]
            before.reserveCapacity(changeset.writes.count)
            var keysBefore: [String] = []
            Self.forEachPiece(of: changeset.writes) { piece in
                let values = committed.withLock { state in piece.map { state.values[$0.key] } }
                for ((key, _), value) in zip(piece, values) {
                    before[key] = .some(value)
                    if value != nil { keysBefore.append(key.rawValue) }
                }
            }
            var order = SortedKeys()
            order.apply(inserting: keysBefore, removing: [])
            let applying = CommittedState.Applying(before: before, keysBefore: order)
            committed.withLock { $0.applying = applying }
            Self.forEachPiece(of: changeset.writes) { piece in
                committed.withLock { $0.values.apply(piece, serial: changeset.serial) }
            }
        }
        let (committedChange, replaced) = committed.withLock { state -> (CommittedChange?, CommittedState.Applying?) in
            state.serial = changeset.serial
            if let touched { state.recentChanges.record(serial: changeset.serial, location: touched) }
            // The keys already in `changedKeys`, so that adding the keys of a large layer or schema file costs
            // what it holds, not its square (10,000 administrator's defaults took 5.5 s to announce); made only
            // for a commit that registers, unregisters or announces.
            var listed = Set<SettingPath>()
            if !schemaKeys.isEmpty || !changeset.announced.isEmpty { listed = Set(changedKeys) }
            for (key, schema) in changeset.registrations {
                // A schema of another type than the stored value's makes Get return the default instead:
                // watchers hear of that as of a write (SettingsRules.registrationIsReported).
                let before = state.effectiveValue(key)
                state.schemas[key] = schema
                if SettingsRules.registrationIsReported(before: before, after: state.effectiveValue(key)),
                    listed.insert(key).inserted
                {
                    changedKeys.append(key)
                }
            }
            for key in changeset.unregistrations {
                // The default goes away, or a stored value the schema did not serve is served again.
                let before = state.effectiveValue(key)
                state.schemas.remove(key)
                if before != state.effectiveValue(key), listed.insert(key).inserted { changedKeys.append(key) }
            }
            for key in changeset.announced where listed.insert(key).inserted { changedKeys.append(key) }
            // The old values are released after the lock.
            let replaced = state.applying
            state.applying = nil
            guard !changedKeys.isEmpty || !schemaKeys.isEmpty else { return (nil, replaced) }
            var change = CommittedChange(
                path: .directory(.root), values: [], removed: [], secretKeys: [], serial: changeset.serial,
                origin: changeset.origin, describedKeys: Set(schemaKeys).sorted())
            if !large {
                state.values.apply(changeset.writes, serial: changeset.serial)
                Self.describe(changedKeys[...], state, into: &change)
            }
            return (change, replaced)
        }
        withExtendedLifetime(replaced) {}
        guard var change = committedChange else { return nil }
        if large {
            change.values.reserveCapacity(changedKeys.count)
            Self.forEachPiece(of: changedKeys) { piece in
                committed.withLock { state in Self.describe(piece, state, into: &change) }
            }
        }
        change.path =
            (changedKeys.count == changeset.writes.count ? written : SettingLocation.enclosing(changedKeys)) ?? .directory(.root)
        // The writes are in key order; keys a registration added come after them.
        if changedKeys.count > changeset.writes.count { change.values.sort { $0.key < $1.key } }
        return change
    }

    /// Adds the effective values of changed keys to a change, as ``SettingsRules/changedKey(_:effective:schema:)``
    /// reports them: a secret key without its value. A key left without a value of the user's carries the value
    /// it reads (its schema's default, or the administrator's default or lock) and is listed as removed too.
    static func describe(_ keys: ArraySlice<SettingPath>, _ state: CommittedState, into change: inout CommittedChange) {
        for key in keys {
            let schema = state.schemas[key]
            let user = state.userValue(key)
            let effective = state.effectiveValue(user, schema, key: key)
            let changed = SettingsRules.changedKey(key, effective: effective, schema: schema)
            if changed.isSecret {
                change.secretKeys.append(key.rawValue)
            } else if let value = changed.value {
                change.values.append(CommittedChange.Value(key: key.rawValue, value: value))
                if state.source(of: key, user: user, schema: schema, effective: value) != .user {
                    change.removed.append(key.rawValue)
                }
            } else {
                change.removed.append(key.rawValue)
            }
        }
    }
}
