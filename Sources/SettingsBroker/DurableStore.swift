// SPDX-License-Identifier: Apache-2.0

// Design note: how a write becomes durable.
//
// `submit` validates a changeset against the staged view (committed state overlaid with changesets accepted
// but not yet committed), gives it the next serial and stages it. At most one SQLite transaction is in flight;
// changesets that arrive meanwhile accumulate and are written together by the next one (group commit: one
// fsync for many writers). When a transaction commits, its changesets are applied to the committed state in
// serial order, the writers are answered, and then the commit handler is called (the D-Bus export emits one
// `Changed` signal per changeset, sent after the answers so that a writer waits for its own reply only).
// Reads see committed state only, so a value is never visible before it is durable. If a transaction fails,
// every staged changeset fails with `StoreFailure` and nothing of it becomes visible. Costs do not depend on
// the store's size: a commit touches only the rows it changes.
//
// Where the transaction runs: a commit started by the D-Bus export (a `Set`, `SetFromString` or `Reset`) runs
// on the connection's own thread once it has dispatched the calls it has read, if it holds at most
// `inlineCommitLimit` writes, the store's lock is free at once and the last commit took at most `slowCommit`;
// the answers and signals it makes are then sent by that thread with no other thread woken. Anything else (an
// `Apply` or `Register` from a task, a large batch, a store locked by another program, any commit after a
// slow one, whatever accumulates during a commit) is written on the store's commit queue, a serial dispatch
// queue, so that a large, blocked or slow commit holds up the connection once at most.
//
// The store is a class with two locks rather than an actor, so that the D-Bus export can validate a `Set` and
// read a `Get` on the connection's own thread: a durable `Set` wakes no thread in the broker but the
// connection's, where an actor and its tasks woke seven. Lock order: `writer`, then `committed`; neither is
// held while calling out.
//
// Directories cost what they hold, and hold up no one for long. The keys of the values, of the schemas and of
// the resets since start-up are kept in byte order (`SortedKeys`), so a directory is a range of keys. Holding
// `committed` stops every `Get` (they are read on the connection's thread), so nothing holds it for more than
// a bounded piece of work (512 keys read, 1,024 written):
// - `ReadTree` and `List` read `readPiece` (512) keys per hold and go on only if no commit in between touched
//   the directory (`RecentChanges`, the locations of the last 64 commits), so each reply is the directory as
//   of one serial; after three restarts under a directory written without pause the rest is read in one hold.
// - A commit of more than `memoryPiece` (1,024) writes (a `Reset` of a large directory, a large `Apply`) is
//   applied to memory in pieces: the old values of its keys are put beside the table first
//   (`CommittedState.applying`, through which every read goes), the table then changes a piece at a time, and
//   one short hold moves the serial on and drops the old values, so readers see all of the commit or none.
//   A batch of more than `memoryPiece` writes is applied without the `writer` lock (a smaller one holds it,
//   as before): validation meanwhile sees the batch's writes staged, and they are unstaged, in pieces, once
//   the committed state shows them.
// - Validation reads a directory's committed keys (a directory reset, a compare-and-set on a directory) in
//   pieces under `writer`; a commit applied between two pieces has its writes staged, which override them.
// The price: while a large commit is applied, a `Get` looks its key up among the old values too, and the old
// values take memory (about 100 bytes a key) until the commit is applied. Taking and staging the keys of a
// directory `Reset` is linear in the directory (0.25 – 0.5 s for 100,000 keys on a loaded machine): the D-Bus
// export does it on its ordered hand-off queue (`WriteHandOff`), not on the connection's thread.

import DBus
import Dispatch
public import SettingsModel

/// The broker's settings: values and schemas in memory for reads, persisted in SQLite with group commit.
public final class DurableStore: Sendable {
    typealias UserValue = CommittedState.UserValue
    /// What a writer is told once its changeset is committed, or why it was not.
    public typealias Completion = @Sendable (Result<UInt64, SettingsError>) -> Void

    /// The store file (its condition and backup are reported by `status()`).
    let persistence: StorePersistence
    /// Values, schemas and serial as of the last commit; written only by commits, one at a time.
    let committed: Locked<CommittedState>
    /// Staging, the changesets waiting for a commit, and what the commit queue is doing.
    private let writer: Locked<WriterState>
    /// Runs the SQLite transactions, one at a time.
    private let commitQueue = DispatchQueue(label: "settings-store-commit")
    /// Keys unseen since start-up count as changed at this serial (resets before start-up are not kept).
    private let baselineSerial: UInt64

    /// The store file.
    public let path: String
    /// Rows of the store file that could not be read at start-up (kept untouched), with the reason.
    public let unreadable: [(path: String, reason: String)]

    private struct WriterState {
        var nextSerial: UInt64
        /// Serials of resets, so compare-and-set sees a removal as a change.
        var resetSerials = ResetSerials()
        var stagedValues: [SettingPath: (value: DBusValue?, serial: UInt64)] = [:]
        var stagedSchemas: [SettingPath: SettingSchema] = [:]
        var accumulating: [(changeset: ResolvedChangeset, completion: Completion)] = []
        var commitInFlight = false
        /// Whether the last commit took longer than `slowCommit`: then the next runs on the commit queue.
        var lastCommitWasSlow = false
        var slowCommit = DurableStore.slowCommit
        var closed = false
        var idleWaiters: [@Sendable () -> Void] = []
        var commitHandler: @Sendable ([CommittedChange]) -> Void = { _ in }
    }

    private init(persistence: StorePersistence, contents: StorePersistence.Contents) {
        self.persistence = persistence
        self.path = persistence.path
        self.baselineSerial = contents.serial
        self.unreadable = contents.unreadable
        self.committed = Locked(
            CommittedState(values: contents.values, schemas: contents.schemas, serial: contents.serial))
        self.writer = Locked(WriterState(nextSerial: contents.serial + 1))
    }

    /// Opens the store file (creating it if needed) and reads it into memory.
    ///
    /// - Throws: ``SettingsError`` `StoreFailure` naming the file and the reason.
    public static func open(path: String, durability: Durability = .full) async throws(SettingsError) -> DurableStore {
        // Opening checks and reads the whole file (about 0.1 s with 100,000 keys): on a thread of its own,
        // not on one of the tasks' threads.
        let opened: Result<StorePersistence, SettingsError> = await handOff { deliver in
            DispatchQueue.global(qos: .userInitiated).async {
                deliver(Result { () throws(SettingsError) in try StorePersistence(path: path, durability: durability) })
            }
        }
        let persistence = try opened.get()
        let contents = try await persistence.load()
        return DurableStore(persistence: persistence, contents: contents)
    }

    /// Sets the function called where each commit ran (the commit queue or the connection's thread), in serial
    /// order, with what the commit changed, after its writers are answered.
    public func setCommitHandler(_ handler: @escaping @Sendable ([CommittedChange]) -> Void) {
        writer.withLock { $0.commitHandler = handler }
    }

    /// The serial of the last commit.
    public var serial: UInt64 { committed.withLock { $0.serial } }

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
        try await handOff { deliver in submit(changeset, completion: deliver) }.get()
    }

    /// Where a small commit may run instead of the commit queue: it runs the commit it is given later on the
    /// calling thread, or returns false to leave it to the queue.
    public typealias CommitRunner = @Sendable (@escaping @Sendable () -> Void) -> Bool

    /// ``apply(_:)`` without waiting: validates and stages the changeset at once, on the calling thread, and
    /// calls `completion` when it is committed or at once when it is refused.
    ///
    /// It never blocks on the disk, so the D-Bus export calls it on the connection's thread. When it starts a
    /// commit and `runner` takes it, a commit of at most ``inlineCommitLimit`` writes runs where `runner` puts
    /// it (the D-Bus export: on the connection's thread once the calls read so far are dispatched, which saves
    /// two thread wake-ups per durable write); anything larger, anything that arrives meanwhile, and every
    /// commit after one slower than ``slowCommit`` until one is fast again, goes to the commit queue.
    public func submit(_ changeset: Changeset, runner: CommitRunner? = nil, completion: @escaping Completion) {
        enum Outcome {
            case answered(Result<UInt64, SettingsError>)
            case queued(startCommit: Bool, mayRunInline: Bool)
        }
        // The checks that need no state run before the lock: for a large changeset they are most of the work,
        // and the lock holds up the connection's thread when a `Set` arrives meanwhile.
        for (key, value) in changeset.sets {
            do throws(SettingsError) {
                try value.validateForStorage(at: key)
            } catch {
                completion(.failure(error))
                return
            }
        }
        let outcome: Outcome = writer.withLock { state in
            guard !state.closed else {
                return .answered(.failure(.storeFailure("the broker is shutting down; retry in a moment")))
            }
            let resolved: ResolvedChangeset
            do throws(SettingsError) {
                resolved = try resolve(changeset, state)
            } catch {
                return .answered(.failure(error))
            }
            guard !resolved.writes.isEmpty || !resolved.registrations.isEmpty else {
                return .answered(.success(state.nextSerial - 1))
            }
            state.nextSerial += 1
            if resolved.writes.count > 64 { state.stagedValues.reserveCapacity(state.stagedValues.count + resolved.writes.count) }
            for write in resolved.writes {
                state.stagedValues[write.key] = (write.value, resolved.serial)
            }
            for registration in resolved.registrations {
                state.stagedSchemas[registration.key] = registration.schema
            }
            state.accumulating.append((resolved, completion))
            guard !state.commitInFlight else { return .queued(startCommit: false, mayRunInline: false) }
            state.commitInFlight = true
            return .queued(startCommit: true, mayRunInline: !state.lastCommitWasSlow)
        }
        switch outcome {
        case .answered(let result): completion(result)
        case .queued(let startCommit, let mayRunInline):
            guard startCommit else { return }
            if mayRunInline, let runner, runner({ self.commitSmallBatch() }) { return }
            commitQueue.async { self.commitAccumulated() }
        }
    }

    /// The most writes a commit may hold to run outside the commit queue (``submit(_:runner:completion:)``).
    public static let inlineCommitLimit = 32

    /// A commit that takes longer than this (a slow or busy disk) sends the next one to the commit queue, and
    /// commits stay there until one is fast again: a slow disk holds up the connection's reads for one commit
    /// at most.
    static let slowCommit: Duration = .milliseconds(2)

    /// Sets the duration above which a commit counts as slow (tests make every commit slow).
    func setSlowCommit(_ duration: Duration) {
        writer.withLock { $0.slowCommit = duration }
    }

    /// Refuses further writes and waits until every accepted changeset has been committed (or has failed).
    public func close() async {
        writer.withLock { $0.closed = true }
        await flush()
    }

    /// Waits until every accepted changeset has been committed (or has failed).
    public func flush() async {
        let _: Bool = await handOff { deliver in
            let idle = writer.withLock { state in
                guard state.commitInFlight || !state.accumulating.isEmpty else { return true }
                state.idleWaiters.append { deliver(true) }
                return false
            }
            if idle { deliver(true) }
        }
    }

    private func resolve(_ changeset: Changeset, _ state: WriterState) throws(SettingsError) -> ResolvedChangeset {
        var registrations: [(key: SettingPath, schema: SettingSchema)] = []
        var newSchemas: [SettingPath: SettingSchema] = [:]
        for (key, schema) in changeset.registrations {
            try schema.validate(for: key)
            if let existing = newSchemas[key] ?? currentSchema(key, state) {
                // The rules of schema evolution: identical is a no-op, compatible is accepted, incompatible
                // only when replacing. A stored value the new schema refuses is kept, and not served.
                if try existing.checkEvolution(to: schema, for: key, replacing: changeset.replacing).isEmpty {
                    continue
                }
            }
            newSchemas[key] = schema
            registrations.append((key, schema))
        }
        var writes: [SettingPath: DBusValue?] = [:]
        // A stored value of another type than its new schema's that converts without loss (an `i` that
        // `dconf load` or a script stored, registered as `x`) is converted in the same commit.
        for (key, schema) in registrations where !changeset.sets.contains(where: { $0.key == key }) {
            if let stored = currentUserValue(key, state), stored.type != schema.type,
                let converted = stored.losslesslyConverted(to: schema.type), schema.accepts(converted)
            {
                writes[key] = .some(converted)
            }
        }
        var touchedDirectories: [SettingDirectory] = []
        // A changeset that only resets one directory (a `Reset`) takes its keys in order as they are, without a
        // dictionary and a sort of 100,000 keys.
        var onlyDirectoryReset: [SettingPath]?
        for location in changeset.resets {
            switch location {
            case .key(let key):
                if currentUserValue(key, state) != nil { writes[key] = .some(nil) }
            case .directory(let directory):
                touchedDirectories.append(directory)
                let keys = userKeys(under: directory, state)
                if changeset.resets.count == 1, changeset.sets.isEmpty, writes.isEmpty {
                    onlyDirectoryReset = keys
                } else {
                    for key in keys { writes[key] = .some(nil) }
                }
            }
        }
        for (key, value) in changeset.sets {
            // validateForStorage ran in submit, before the lock.
            var value = value
            if let schema = newSchemas[key] ?? currentSchema(key, state) {
                // A value of a narrower type that converts without loss is stored as the registered type.
                if value.type != schema.type, let converted = value.losslesslyConverted(to: schema.type) {
                    value = converted
                }
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
            for key in setKeys + resetKeys where lastChange(of: key, state) > ifSerial {
                throw .conflict("\(key) changed at serial \(lastChange(of: key, state)), after serial \(ifSerial)")
            }
            for directory in touchedDirectories {
                if let reason = change(under: directory, after: ifSerial, state) { throw .conflict(reason) }
            }
        }
        return ResolvedChangeset(
            serial: state.nextSerial,
            writes: onlyDirectoryReset?.map { ($0, nil) } ?? writes.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
            registrations: registrations, origin: changeset.origin)
    }

    private typealias Batch = [(changeset: ResolvedChangeset, completion: Completion)]

    /// Commits what has accumulated, batch after batch, until nothing is left. Commit queue only.
    private func commitAccumulated() {
        while true {
            guard let batch = takeBatch(limit: nil) else {
                if endCommitting() { return }
                continue
            }
            commit(batch)
        }
    }

    /// Commits what has accumulated where a ``CommitRunner`` put it, if it is at most ``inlineCommitLimit``
    /// writes; anything more, or accumulated meanwhile, goes on to the commit queue.
    /// It never waits for a lock another program holds on the store file: it leaves the batch to the queue.
    private func commitSmallBatch() {
        if let batch = takeBatch(limit: Self.inlineCommitLimit) {
            if commit(batch, waitingForLocks: false) {
                if endCommitting() { return }
            } else {
                writer.withLock { $0.accumulating = batch + $0.accumulating }
            }
        }
        commitQueue.async { self.commitAccumulated() }
    }

    /// Takes the accumulated changesets, or nil if there are none or they hold more than `limit` writes.
    private func takeBatch(limit: Int?) -> Batch? {
        writer.withLock { state in
            guard !state.accumulating.isEmpty else { return nil }
            if let limit {
                var writes = 0
                for entry in state.accumulating {
                    writes += entry.changeset.writes.count + entry.changeset.registrations.count
                    if writes > limit { return nil }
                }
            }
            defer { state.accumulating = [] }
            return state.accumulating
        }
    }

    /// Ends the commits in flight if nothing has accumulated (and tells the waiters); false if something has.
    private func endCommitting() -> Bool {
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

    /// Writes a batch and answers its writers; false if it was not written because another program holds the
    /// store's lock and `waitingForLocks` is false.
    @discardableResult
    private func commit(_ batch: Batch, waitingForLocks: Bool = true) -> Bool {
        do throws(SettingsError) {
            let start = ContinuousClock.now
            guard try persistence.commit(batch.map(\.changeset), waitingForLocks: waitingForLocks) else { return false }
            finishCommit(batch, took: ContinuousClock.now - start)
        } catch {
            failCommit(batch, error)
        }
        return true
    }

    private func finishCommit(_ batch: Batch, took duration: Duration) {
        var changes: [CommittedChange] = []
        let handler: @Sendable ([CommittedChange]) -> Void
        if batch.reduce(0, { $0 + $1.changeset.writes.count }) <= Self.memoryPiece {
            handler = writer.withLock { state in
                for (changeset, _) in batch {
                    state.resetSerials.record(changeset.writes, serial: changeset.serial)
                    if let change = commitToMemory(changeset) { changes.append(change) }
                }
                return endCommit(batch, took: duration, unstagingValues: true, &state)
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
            handler = writer.withLock { state in endCommit(batch, took: duration, unstagingValues: false, &state) }
        }
        for (changeset, completion) in batch { completion(.success(changeset.serial)) }
        handler(changes)
    }

    /// Unstages what a batch wrote (its values unless `unstagingValues` is false: they were already), now
    /// that the committed state shows it, and returns the commit handler.
    private func endCommit(
        _ batch: Batch, took duration: Duration, unstagingValues: Bool, _ state: inout WriterState
    ) -> @Sendable ([CommittedChange]) -> Void {
        state.lastCommitWasSlow = duration > state.slowCommit
        let last = batch.last!.changeset.serial
        for (changeset, _) in batch {
            // A key written again by a later changeset, not yet committed, stays staged.
            for (key, _) in changeset.writes where unstagingValues && (state.stagedValues[key]?.serial ?? .max) <= last {
                state.stagedValues[key] = nil
            }
            for registration in changeset.registrations
            where state.stagedSchemas[registration.key] == registration.schema {
                state.stagedSchemas[registration.key] = nil
            }
        }
        return state.commitHandler
    }

    /// A failed transaction: later changesets were validated on top of the failed ones, so they fail too, and
    /// all staging is forgotten.
    private func failCommit(_ batch: Batch, _ error: SettingsError) {
        let pending = writer.withLock { state in
            let pending = batch + state.accumulating
            state.accumulating = []
            state.stagedValues = [:]
            state.stagedSchemas = [:]
            state.nextSerial = committed.withLock { $0.serial } + 1
            return pending
        }
        for (_, completion) in pending { completion(.failure(error)) }
    }

    /// The most keys a commit writes to memory under one hold of a lock; a larger commit is applied in pieces
    /// of this size (well under a millisecond of work on an idle machine, a few on a loaded one), so that it
    /// holds up `Get`s and writers for a piece at a time.
    static let memoryPiece = 1024

    /// Calls `body` with a commit's writes in pieces of ``memoryPiece``.
    private static func forEachPiece<T>(of writes: [T], _ body: (ArraySlice<T>) -> Void) {
        var start = 0
        while start < writes.count {
            let end = min(start + memoryPiece, writes.count)
            body(writes[start..<end])
            start = end
        }
    }

    /// Applies a committed changeset to memory and returns what the `Changed` signal reports of it.
    ///
    /// Commits run one at a time, so nothing else changes the committed state meanwhile. A changeset of at most
    /// ``memoryPiece`` writes is applied under one hold of the `committed` lock. A larger one (a `Reset` of a
    /// directory of 100,000 keys, a large `Apply`) is applied in pieces: the user values its keys had are read
    /// first, in pieces, and put beside the table (`CommittedState.applying`), so that every read meanwhile
    /// sees the state before the commit; the writes then go into the table a piece at a time; and one short
    /// hold of the lock registers its schemas, moves the serial on and drops the old values, so that readers
    /// see the whole commit at once. What the signal reports is then read in pieces too.
    private func commitToMemory(_ changeset: ResolvedChangeset) -> CommittedChange? {
        var changedKeys = changeset.writes.map(\.key)
        let written = SettingLocation.enclosing(changedKeys)
        let touched =
            changeset.registrations.isEmpty ? written : SettingLocation.enclosing(changedKeys + changeset.registrations.map(\.key))
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
            // The old values are released after the lock.
            let replaced = state.applying
            state.applying = nil
            guard !changedKeys.isEmpty else { return (nil, replaced) }
            var change = CommittedChange(
                path: .directory(.root), values: [], removed: [], secretKeys: [], serial: changeset.serial,
                origin: changeset.origin)
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

    /// Adds the effective values of changed keys to a change.
    private static func describe(_ keys: ArraySlice<SettingPath>, _ state: CommittedState, into change: inout CommittedChange) {
        for key in keys {
            if state.schemas[key]?.isSecret == true {
                change.secretKeys.append(key.rawValue)
            } else if let effective = state.effectiveValue(key) {
                change.values.append(CommittedChange.Value(key: key.rawValue, value: effective))
            } else {
                change.removed.append(key.rawValue)
            }
        }
    }

    // MARK: - Staged view (for validation)

    private func currentSchema(_ key: SettingPath, _ state: WriterState) -> SettingSchema? {
        state.stagedSchemas[key] ?? committed.withLock { $0.schemas[key] }
    }

    private func currentUserValue(_ key: SettingPath, _ state: WriterState) -> DBusValue? {
        if let staged = state.stagedValues[key] { return staged.value }
        return committed.withLock { $0.userValue(key)?.value }
    }

    /// The keys below a directory that have a user value in the staged view, in order. The committed ones are
    /// read in pieces, so that `Get`s are not held up by a large directory: a commit that changes them between
    /// two pieces is one whose writes are staged, and the staged view overrides them.
    private func userKeys(under directory: SettingDirectory, _ state: WriterState) -> [SettingPath] {
        var keys: [SettingPath] = []
        var resume: ReadResume?
        repeat {
            resume = committed.withLock { committed in
                committed.forEachKeyWithValue(in: directory, after: resume, limit: 8 * Self.readPiece) { keys.append($0) }
            }
        } while resume != nil
        var staged: [SettingPath: Bool] = [:]
        for (key, value) in state.stagedValues where directory.contains(key) { staged[key] = value.value != nil }
        guard !staged.isEmpty else { return keys }
        keys.removeAll { staged[$0] == false }
        let added = staged.filter { $0.value }.keys.sorted()
        guard !added.isEmpty else { return keys }
        // Both in order: merge them, leaving out keys that are in both.
        var merged: [SettingPath] = []
        merged.reserveCapacity(keys.count + added.count)
        var i = 0, j = 0
        while i < keys.count || j < added.count {
            if j == added.count || (i < keys.count && keys[i] < added[j]) {
                merged.append(keys[i]); i += 1
            } else {
                if i < keys.count, keys[i] == added[j] { i += 1 }
                merged.append(added[j]); j += 1
            }
        }
        return merged
    }

    private func lastChange(of key: SettingPath, _ state: WriterState) -> UInt64 {
        state.stagedValues[key]?.serial ?? committed.withLock { $0.userValue(key)?.serial } ?? state.resetSerials[key]
            ?? baselineSerial
    }

    /// Why a directory counts as changed after a serial, or nil if nothing below it changed.
    private func change(under directory: SettingDirectory, after ifSerial: UInt64, _ state: WriterState) -> String? {
        if baselineSerial > ifSerial {
            return "\(directory) may have changed after serial \(ifSerial): the broker started at serial "
                + "\(baselineSerial) and keeps no older history; read again and retry"
        }
        for (key, staged) in state.stagedValues where directory.contains(key) && staged.serial > ifSerial {
            return "\(key) under \(directory) changed at serial \(staged.serial), after serial \(ifSerial)"
        }
        // Read in pieces, as in `userKeys(under:)`: a commit applied meanwhile has its writes staged, and they
        // were checked above.
        var changed: (key: SettingPath, serial: UInt64)?
        var resume: ReadResume?
        repeat {
            resume = committed.withLock { committed in
                committed.forEachValue(in: directory, after: resume, limit: 8 * Self.readPiece) { key, user in
                    if user.serial > ifSerial { changed = (key, user.serial) }
                    return changed == nil
                }
            }
        } while resume != nil
        if let (key, serial) = changed {
            return "\(key) under \(directory) changed at serial \(serial), after serial \(ifSerial)"
        }
        if let (key, reset) = state.resetSerials.first(in: directory, after: ifSerial) {
            return "\(key) under \(directory) was reset at serial \(reset), after serial \(ifSerial)"
        }
        return nil
    }

    /// The serial of the last reset of a key without a user value since start-up, if any.
    func lastResetSerial(of key: SettingPath) -> UInt64? {
        writer.withLock { $0.resetSerials[key] }
    }
}
