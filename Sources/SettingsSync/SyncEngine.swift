// SPDX-License-Identifier: Apache-2.0

public import DBus
public import Logging
import PostgresNIO
public import SettingsBroker
public import SettingsModel

/// Syncs a broker's store with a PostgreSQL database shared by the user's machines (README, "Sync across
/// machines"; decision 0028).
///
/// One task does everything, in a loop: connect, make the tables if missing, join (the first time), then push
/// the queue and pull everything after the cursor, and wait for a hint (a local commit that queued something,
/// a NOTIFY on a second connection) or ``SyncConfiguration/pullInterval``. A polling broker
/// (``SyncConfiguration/pollInterval``) instead closes its connection after each push and pull, and connects
/// again after the interval or soon after a local commit. Any failure closes the connections
/// and the loop starts again after a growing wait with jitter, up to ``SyncConfiguration/longestRetry``.
/// Local service never waits for it.
public final class SyncEngine: StoreSync {
    let configuration: SyncConfiguration
    let logger: Logger
    let environment: [String: String]
    let clock: HybridLogicalClock
    /// What `Status` reports, and what the loop needs to know across attempts.
    let state = Locked(State())
    /// Wakes the loop: a local commit queued changes, or a NOTIFY arrived.
    let wake = Wake()
    /// The payloads of the NOTIFYs that arrived since the loop last looked: it applies the rows they carry
    /// (``SyncDatabase/hintedRows(_:)``) when they are the next revision after its cursor, else pulls, before
    /// it looks at its own queue.
    let hints = Locked<[String]>([])
    private let task = Locked<Task<Void, Never>?>(nil)

    struct State {
        var phase = "starting"
        var queued = 0
        var lastSync: Int64?
        var cursor: Int64 = 0
        var error: String?
        var clamped: [String] = []
        /// Remote changes this machine's store refused, by key, the latest last: `key from machine: reason`.
        /// A later remote change of the key that is applied takes its key off.
        var refused: [(key: SettingPath, text: String)] = []
        var store: DurableStore?
        /// Whether a recount of the queue for `Status` is on its way.
        var recounting = false
    }

    /// Makes the engine; nothing happens before the broker calls ``start(store:)``.
    public init(configuration: SyncConfiguration, logger: Logger, environment: [String: String]) {
        self.configuration = configuration
        self.logger = logger
        self.environment = environment
        self.clock = HybridLogicalClock(offsetMilliseconds: configuration.clockOffsetMilliseconds)
    }

    public func start(store: DurableStore) async {
        store.enableSync(
            SyncSettings(
                directories: configuration.directories, machine: configuration.machineID, clock: clock,
                queued: { [weak self] in self?.noteQueued(store) }))
        state.withLock { $0.store = store }
        let running = Task { await self.run(store) }
        task.withLock { $0 = running }
    }

    public func stop() async {
        let running = task.withLock { task in
            defer { task = nil }
            return task
        }
        running?.cancel()
        wake.signal()
        await running?.value
    }

    public func status() -> [String: DBusValue] {
        state.withLock { state in
            var fields: [String: DBusValue] = [
                "sync-state": .string(state.phase), "sync-queued": .uint64(UInt64(max(0, state.queued))),
                "sync-cursor": .int64(state.cursor), "sync-machine": .string(configuration.machineName),
                "sync-database": .string(configuration.database.description),
            ]
            if let lastSync = state.lastSync { fields["sync-last"] = .int64(lastSync) }
            if let error = state.error { fields["sync-error"] = .string(error) }
            if !state.clamped.isEmpty {
                fields["sync-clamped-machines"] = .array(.string, state.clamped.map { .string($0) })
            }
            if !state.refused.isEmpty {
                fields["sync-refused"] = .array(.string, state.refused.map { .string($0.text) })
            }
            return fields
        }
    }

    /// A commit queued changes: wake the loop (when connected), and recount the queue for `Status` (at most
    /// one recount on its way, a fifth of a second after the first commit that asks for it).
    private func noteQueued(_ store: DurableStore) {
        wake.signal()
        let start = state.withLock { state in
            defer { state.recounting = true }
            return !state.recounting
        }
        guard start else { return }
        Task { [state] in
            try? await Task.sleep(for: .milliseconds(200))
            state.withLock { $0.recounting = false }
            if let count = try? await store.queuedSyncCount() { state.withLock { $0.queued = count } }
        }
    }

    // MARK: - The loop

    private func run(_ store: DurableStore) async {
        if let recorded = try? await store.largestSyncClock() { clock.observe(recorded) }
        let cursor = (try? await store.syncState("cursor")) ?? 0
        let queued = (try? await store.queuedSyncCount()) ?? 0
        state.withLock {
            $0.cursor = cursor ?? 0
            $0.queued = queued
        }
        var failures = 0
        while !Task.isCancelled {
            do {
                try await session(store) { failures = 0 }
                // Only a polling session returns: the next one comes after the interval, or a moment after a
                // local commit queues a change.
                if let interval = configuration.pollInterval {
                    state.withLock { $0.phase = "polling" }
                    await wake.wait(timeout: interval * Double.random(in: 1...1.25))
                    try await Task.sleep(for: configuration.pollSettle)
                    continue
                }
            } catch is CancellationError {
                break
            } catch {
                if Task.isCancelled { break }
                failures += 1
                let (phase, text) = describe(error)
                let queued = (try? await store.queuedSyncCount()) ?? 0
                let changed = state.withLock { state in
                    defer {
                        state.phase = phase
                        state.error = text
                        state.queued = queued
                    }
                    return state.error != text || state.phase != phase
                }
                if changed {
                    logger.warning(
                        "sync: the database cannot be used; local service goes on and sync retries on its own",
                        metadata: ["database": "\(configuration.database)", "state": "\(phase)", "error": "\(text)"])
                }
            }
            if Task.isCancelled { break }
            // Not woken by local commits: a burst of writes while offline must not become a burst of attempts.
            try? await Task.sleep(for: retryDelay(after: failures))
        }
        state.withLock { $0.phase = "stopped" }
    }

    /// The wait before attempt `failures + 1`: 0.5 s doubled each time, up to the longest retry, with up to
    /// half of it added at random.
    func retryDelay(after failures: Int) -> Duration {
        let base = min(0.5 * Double(1 << min(failures, 16)), Double(configuration.longestRetry.components.seconds))
        return .milliseconds(Int64((base + Double.random(in: 0...(base / 2))) * 1000))
    }

    /// How an error is reported: `offline` when the database cannot be reached, `error` when it refuses.
    func describe(_ error: any Error) -> (phase: String, text: String) {
        if let transaction = error as? PostgresTransactionError,
            let inner = transaction.closureError ?? transaction.beginError ?? transaction.commitError
        {
            return describe(inner)
        }
        if let refused = error as? SyncRefusal { return ("error", refused.description) }
        if let psql = error as? PSQLError {
            if let message = psql.serverInfo?[.message] {
                let code = psql.serverInfo?[.sqlState] ?? ""
                // 28xxx: invalid authorization; 3D000: no such database; 42501: permission.
                let refused = code.hasPrefix("28") || code == "3D000" || code == "42501"
                return (refused ? "error" : "offline", "\(message) (SQLSTATE \(code))")
            }
            return ("offline", "\(psql.code)")
        }
        return ("offline", "\(error)")
    }

    /// One connected session: runs until an error or cancellation.
    private func session(_ store: DurableStore, connected: () -> Void) async throws {
        let password = try configuration.password(environment: environment)
        let database = try await SyncDatabase.connect(configuration, password: password, logger: logger)
        defer { Task { await database.close() } }
        try await bounded(database) { try await database.prepare() }
        try await bounded(database) { try await database.registerMachine() }
        connected()
        let polling = configuration.pollInterval != nil
        let listener = polling ? nil : Task { [wake, hints, logger, configuration] in
            // A second connection for the hint; a failure here only means waiting for the periodic pull.
            do {
                let listening = try await SyncDatabase.connect(configuration, password: password, logger: logger)
                defer { Task { await listening.close() } }
                try await listening.listen { payload in
                    hints.withLock { hints in
                        // A loop that fell this far behind pulls; the oldest payloads are not needed then.
                        if hints.count >= 1000 { hints.removeFirst(hints.count - 999) }
                        hints.append(payload)
                    }
                    wake.signal()
                }
            } catch {}
        }
        defer { listener?.cancel() }
        if try await store.syncState("joined") == nil {
            try await join(store)
        }
        state.withLock {
            $0.phase = "connected"
            $0.error = nil
        }
        while !Task.isCancelled {
            let payloads = hints.withLock { hints in
                defer { hints = [] }
                return hints
            }
            let hinted = !payloads.isEmpty
            if hinted, try await !applyHinted(payloads, store) { try await pull(store, database) }
            let pushed = try await push(store, database)
            if !hinted || pushed > 0 { try await pull(store, database) }
            let queued = try await store.queuedSyncCount()
            let now = Int64(HybridLogicalClock.wallClock() >> 16)
            state.withLock { state in
                state.lastSync = now
                state.queued = queued
                state.phase = "connected"
            }
            if queued > 0 { continue }
            if polling { return }
            await wake.wait(timeout: configuration.pullInterval)
        }
        throw CancellationError()
    }

    // MARK: - Join, push, pull

    /// The first sync of this store: a copy aside for `--sync-restore`, then this machine's user values of
    /// synced keys queued with the join's version (they win over older remote values, lose to newer ones).
    private func join(_ store: DurableStore) async throws {
        try await store.copyBeforeSync()
        let settings = SyncSettings(directories: configuration.directories, machine: configuration.machineID, clock: clock)
        let values = store.syncedUserValues(under: configuration.directories, settings: settings)
        if !values.isEmpty {
            let version = SyncVersion(clock: clock.tick(), machine: configuration.machineID)
            try await store.queueForSync(values.map { SyncChange(key: $0.0, value: $0.1, version: version) })
        }
        try await store.setSyncState("joined", Int64(HybridLogicalClock.wallClock() >> 16))
        logger.info(
            "sync: joined; the store as it was is kept for --sync-restore",
            metadata: ["copy": "\(store.beforeSyncCopyPath)", "queued": "\(values.count)"])
    }

    /// Pushes the queue, in pieces, each in one transaction of the database; returns how many changes went.
    @discardableResult
    private func push(_ store: DurableStore, _ database: SyncDatabase) async throws -> Int {
        var count = 0
        while !Task.isCancelled {
            let changes = try await store.queuedSyncChanges(limit: 1000)
            guard !changes.isEmpty else { return count }
            count += changes.count
            let pushed = try await bounded(database) { try await database.push(changes) }
            if pushed.clamped {
                logger.warning(
                    "sync: this machine's clock is ahead of the database's by more than the bound; its versions were clamped",
                    metadata: ["bound-ms": "\(configuration.clockBoundMilliseconds)"])
            }
            try await store.acknowledgeSyncChanges(changes, as: pushed.versions)
            state.withLock { $0.queued = max(0, $0.queued - changes.count) }
        }
        return count
    }

    /// Applies the rows NOTIFY payloads carry when each is the revision right after the cursor (revisions
    /// have no gaps, so nothing before it is missing); false when a pull is needed: a payload without rows of
    /// this scope (a push too large to carry), a revision further on (a NOTIFY was missed), the hint the
    /// listener gives when it starts.
    private func applyHinted(_ payloads: [String], _ store: DurableStore) async throws -> Bool {
        var complete = true
        for payload in payloads {
            guard let hinted = SyncDatabase.hintedRows(payload) else {
                if payload.isEmpty || payload == configuration.scope { complete = false }
                continue
            }
            guard hinted.scope == configuration.scope else { continue }
            let cursor = state.withLock { $0.cursor }
            guard hinted.revision > cursor else { continue }
            guard hinted.revision == cursor + 1 else {
                complete = false
                continue
            }
            try await apply(hinted.rows, upTo: hinted.revision, store)
            state.withLock { $0.cursor = hinted.revision }
        }
        return complete
    }

    /// Pulls everything after the cursor and applies what is newer than the local versions.
    private func pull(_ store: DurableStore, _ database: SyncDatabase) async throws {
        while !Task.isCancelled {
            let cursor = state.withLock { $0.cursor }
            let rows = try await bounded(database) { try await database.pull(after: cursor, limit: 2000) }
            guard let last = rows.last?.revision else {
                let clamped = try await bounded(database) { try await database.clampedMachines() }
                state.withLock { $0.clamped = clamped }
                return
            }
            try await apply(rows, upTo: last, store)
            state.withLock { $0.cursor = last }
        }
    }

    /// Applies pulled rows: one commit per run of rows from one machine, each moving the cursor.
    ///
    /// The order matters: the clock observes the rows first, so that any local commit validated after
    /// `checked` has a newer version than theirs; the store's commits up to `checked` have their versions in
    /// `local`; a key written after `checked` is left alone by the commit itself (``RemoteChanges/checkedSerial``).
    private func apply(_ rows: [SyncDatabase.Row], upTo last: Int64, _ store: DurableStore) async throws {
        if let newest = rows.map(\.change.version.clock).max() { clock.observe(newest) }
        let checked = store.serial
        let local = try await store.syncVersions(of: rows.map(\.change.key))
        // The newest row of each key (a key appears once per pull, but be sure).
        var newer: [SyncDatabase.Row] = []
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
            try await commit(run, cursor: end == newer.count ? last : run.last!.revision, checked: checked, store)
            start = end
        }
        // Also when the last commit had nothing left to write (its keys were all written here meanwhile) or
        // its last change was refused.
        try await store.setSyncState("cursor", last)
    }

    /// Commits a run of remote changes as one changeset; when the store refuses it (a value its schema
    /// refuses, a locked key), commits them one by one and skips the refused ones, with a log line each (the
    /// cursor then moves with the last change committed, and ``apply(_:upTo:_:)`` sets it past the run).
    private func commit(
        _ run: [SyncDatabase.Row], cursor: Int64, checked: UInt64, _ store: DurableStore
    ) async throws {
        let origin = DurableStore.syncOrigin(machineName: run[0].machineName)
        func changeset(_ rows: ArraySlice<SyncDatabase.Row>, cursor: Int64?) -> Changeset {
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
            _ = try await store.apply(changeset(run[...], cursor: cursor))
            noteApplied(run.map(\.change.key))
        } catch {
            guard error.code != .storeFailure else { throw error }
            for index in run.indices {
                do {
                    _ = try await store.apply(changeset(run[index...index], cursor: index == run.count - 1 ? cursor : nil))
                    noteApplied([run[index].change.key])
                } catch {
                    guard error.code != .storeFailure else { throw error }
                    noteRefused(run[index], error)
                }
            }
        }
    }

    /// The most refused changes `Status` lists.
    static let refusedShown = 20

    /// A remote change the store refused: logged, and listed by `Status` (`sync-refused`) until a later change
    /// of the key is applied.
    private func noteRefused(_ row: SyncDatabase.Row, _ error: SettingsError) {
        logger.warning(
            "sync: a remote change is refused by this machine's store and not applied",
            metadata: ["key": "\(row.change.key)", "machine": "\(row.machineName)", "error": "\(error.message)"])
        let text = "\(row.change.key) from \(row.machineName): \(error.message)"
        state.withLock { state in
            state.refused.removeAll { $0.key == row.change.key }
            state.refused.append((row.change.key, text))
            if state.refused.count > Self.refusedShown { state.refused.removeFirst(state.refused.count - Self.refusedShown) }
        }
    }

    /// Remote changes applied: a refusal of their keys is over.
    private func noteApplied(_ keys: [SettingPath]) {
        state.withLock { state in
            guard !state.refused.isEmpty else { return }
            let applied = Set(keys)
            state.refused.removeAll { applied.contains($0.key) }
        }
    }
}

/// A round trip to the database that took longer than ``SyncEngine/roundTripLimit``.
struct SyncTimeout: Error, CustomStringConvertible {
    var description: String { "the database did not answer within \(SyncEngine.roundTripLimit)" }
}

extension SyncEngine {
    /// The longest a statement or transaction may take before the connection is given up.
    static let roundTripLimit: Duration = .seconds(20)

    /// Runs one round trip to the database; past ``roundTripLimit`` the connection is closed and the call
    /// fails with ``SyncTimeout`` (a connection whose server went away does not always fail its queries).
    func bounded<T: Sendable>(
        _ database: SyncDatabase, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let answered = Locked(false)
        func claim() -> Bool {
            answered.withLock { done in
                defer { done = true }
                return !done
            }
        }
        var work: Task<Void, Never>?
        var timer: Task<Void, Never>?
        defer {
            timer?.cancel()
        }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            work = Task {
                do {
                    let value = try await body()
                    if claim() { continuation.resume(returning: value) }
                } catch {
                    if claim() { continuation.resume(throwing: error) }
                }
            }
            timer = Task { [work] in
                do { try await Task.sleep(for: Self.roundTripLimit) } catch { return }
                guard claim() else { return }
                work?.cancel()
                await database.close()
                continuation.resume(throwing: SyncTimeout())
            }
        }
    }
}

/// The database refused to serve this broker for a reason retrying will not change soon (a schema newer than
/// this broker knows).
struct SyncRefusal: Error, CustomStringConvertible {
    var description: String
}

/// A wake-up signal for one waiter: ``signal()`` wakes the current or the next ``wait(timeout:)``.
final class Wake: Sendable {
    private let state = Locked<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func signal() {
        let waiter = state.withLock { state in
            defer { state.waiter = nil }
            if state.waiter == nil { state.pending = true }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Waits for a signal or until `timeout` has passed.
    func wait(timeout: Duration) async {
        let timer = Task { [weak self] in
            // Cancelled once the wait is over: it must not signal then, or the next wait would end at once.
            do { try await Task.sleep(for: timeout) } catch { return }
            self?.signal()
        }
        defer { timer.cancel() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state in
                if state.pending {
                    state.pending = false
                    return true
                }
                state.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        state.withLock { $0.pending = false }
    }
}
