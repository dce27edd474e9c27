// SPDX-License-Identifier: Apache-2.0

public import DBus
import Foundation
public import Logging
import PostgresNIO
public import SettingsBroker
import SettingsModel

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
    /// Whether a NOTIFY for this scope arrived since the loop last looked: it then pulls before it looks at
    /// its own queue. A payload is never data (any role that can connect may NOTIFY): only a pull of the
    /// table applies anything.
    let hinted = Locked(false)
    private let task = Locked<Task<Void, Never>?>(nil)
    /// The bound of a statement: ``quickLimit``, or ``roundTripLimit`` in the session after one that took
    /// longer than the quick bound.
    let statementLimit = Locked(SyncEngine.quickLimit)

    struct State {
        var phase = "starting"
        var queued = 0
        var lastSync: Int64?
        var cursor: Int64 = 0
        var error: String?
        var clamped: [String] = []
        /// Remote changes this machine refused (its store, its sync settings, or a row it cannot read), by key
        /// as the database spells it, the latest last: `key from machine: reason`. A later remote change of the
        /// key that is applied takes its key off.
        var refused: [(key: String, text: String)] = []
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
            $0.cursor = cursor
            $0.queued = queued
        }
        var failures = 0
        var silent = false
        while !Task.isCancelled {
            do {
                silent = false
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
                silent = error is SyncTimeout
                if let timeout = error as? SyncTimeout, !timeout.connecting, timeout.limit < Self.roundTripLimit {
                    // Silent, or only slow: the next session's statements have the long bound, so that a
                    // statement that takes long on a live connection is not given up again and again.
                    statementLimit.withLock { $0 = Self.roundTripLimit }
                }
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
            // After a silent connection the next attempt comes at once: the silence took its bound already.
            try? await Task.sleep(for: silent ? Self.retryAfterSilence : retryDelay(after: failures))
        }
        state.withLock { $0.phase = "stopped" }
    }

    /// The wait before attempt `failures + 1`: 0.5 s doubled each time, up to the longest retry, with up to
    /// half of it added at random.
    func retryDelay(after failures: Int) -> Duration {
        let base = min(0.5 * Double(1 << min(failures, 16)), Double(configuration.longestRetry.components.seconds))
        return .milliseconds(Int64((base + Double.random(in: 0...(base / 2))) * 1000))
    }

    /// The password read for the database, so that no error text shows it (``describe(_:)``).
    private let password = Locked<String?>(nil)

    /// Records the password read for the database: ``describe(_:)`` masks it wherever an error's text holds it.
    func notePassword(_ password: String?) {
        self.password.withLock { $0 = password }
    }

    /// How an error is reported: `offline` when the database cannot be reached, `error` when it refuses. The
    /// text never holds a password: neither the one read for the database nor one in a URL it quotes.
    func describe(_ error: any Error) -> (phase: String, text: String) {
        let (phase, text) = describeUnmasked(error)
        return (phase, masked(text))
    }

    /// `text` with the database's password and any URL's password (`scheme://user:password@`) masked.
    func masked(_ text: String) -> String {
        var text = text
        if let password = password.withLock({ $0 }), !password.isEmpty {
            text = text.replacingOccurrences(of: password, with: "********")
        }
        // A URL's user information: what follows the user's ':' up to the '@'.
        return text.replacingOccurrences(
            of: #"(://[^:/@\s]*):[^@\s]*@"#, with: "$1:********@", options: .regularExpression)
    }

    private func describeUnmasked(_ error: any Error) -> (phase: String, text: String) {
        if let transaction = error as? PostgresTransactionError,
            let inner = transaction.closureError ?? transaction.beginError ?? transaction.commitError
        {
            return describeUnmasked(inner)
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
        notePassword(password)
        let database = try await Self.connect(configuration, password: password, logger: logger)
        defer { Task { await database.close() } }
        try await bounded(database, limit: Self.roundTripLimit) { try await database.prepare() }
        try await bounded(database) { try await database.registerMachine() }
        connected()
        let polling = configuration.pollInterval != nil
        let listener = polling ? nil : Task { [wake, hinted, logger, configuration] in
            // A second connection for the hint; a failure here only means waiting for the periodic pull.
            do {
                let listening = try await Self.connect(configuration, password: password, logger: logger)
                defer { Task { await listening.close() } }
                try await listening.listen { payload in
                    guard SyncDatabase.isHint(payload, forScope: configuration.scope) else { return }
                    hinted.withLock { $0 = true }
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
            let woken = hinted.withLock { hinted in
                defer { hinted = false }
                return hinted
            }
            if woken { try await pull(store, database) }
            let pushed = try await push(store, database)
            if !woken || pushed > 0 { try await pull(store, database) }
            let queued = try await store.queuedSyncCount()
            let now = Int64(HybridLogicalClock.wallClock() >> 16)
            state.withLock { state in
                state.lastSync = now
                state.queued = queued
                state.phase = "connected"
            }
            // A whole round went well: statements are bounded short again (a slow one had the long bound).
            statementLimit.withLock { $0 = Self.quickLimit }
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

    /// Pulls everything after the cursor and applies what is newer than the local versions. The cursor moves
    /// past the rows refused too (unreadable, out of bounds, not synced here): each is listed in `Status`.
    private func pull(_ store: DurableStore, _ database: SyncDatabase) async throws {
        while !Task.isCancelled {
            let cursor = state.withLock { $0.cursor }
            let page = try await bounded(database) { try await database.pull(after: cursor, limit: 2000) }
            guard let last = page.last else {
                let clamped = try await bounded(database) { try await database.clampedMachines() }
                state.withLock { $0.clamped = clamped }
                return
            }
            if let first = page.refused.first {
                logger.warning(
                    "sync: rows of the database cannot be applied here and are skipped",
                    metadata: [
                        "count": "\(page.refused.count)", "key": "\(first.key)", "machine": "\(first.machineName)",
                        "error": "\(first.reason)",
                    ])
                for row in page.refused { noteRefused(key: row.key, machine: row.machineName, reason: row.reason) }
            }
            try await apply(page.rows, upTo: last, store)
            state.withLock { $0.cursor = last }
        }
    }

    /// Why this machine does not take a remote change of `key`, nil when it does: it takes exactly what it
    /// would push itself (a key under its synced directories, neither secret nor machine-local here).
    func notSyncedHere(_ key: SettingPath, _ store: DurableStore) -> String? {
        guard configuration.directories.contains(where: { $0.contains(key) }) else {
            return "the key is outside the directories this machine syncs"
        }
        guard let schema = store.registeredSchema(of: key) else { return nil }
        if schema.isSecret { return "the key is secret on this machine, which never syncs it" }
        if schema.isMachineLocal { return "the key is machine-local on this machine, which never syncs it" }
        return nil
    }

    /// Applies pulled rows: one commit per run of rows from one machine, each moving the cursor.
    ///
    /// The order matters: the clock observes the rows first, so that any local commit validated after
    /// `checked` has a newer version than theirs; the store's commits up to `checked` have their versions in
    /// `local`; a key written after `checked` is left alone by the commit itself (``RemoteChanges/checkedSerial``).
    private func apply(_ rows: [SyncDatabase.Row], upTo last: Int64, _ store: DurableStore) async throws {
        let rows = rows.filter { row in
            guard let reason = notSyncedHere(row.change.key, store) else { return true }
            noteRefused(key: row.change.key.rawValue, machine: row.machineName, reason: reason, log: true)
            return false
        }
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

/// A round trip to the database, or a connection attempt, that took longer than its bound: the connection
/// went silent, or the database is too slow to answer.
struct SyncTimeout: Error, CustomStringConvertible {
    var limit: Duration
    var connecting = false
    var description: String {
        connecting
            ? "no connection to the database within \(limit)" : "the database did not answer within \(limit)"
    }
}

extension SyncEngine {
    /// The longest a statement may take before the connection is given up: making the tables, and any
    /// statement of a session after one that took longer than ``quickLimit``.
    static let roundTripLimit: Duration = .seconds(20)
    /// The longest a statement of sync (a push, a page of a pull) may take before the connection is taken
    /// for silent (a network cut): far above what one takes on a live connection. Past it, the next session
    /// bounds its statements by ``roundTripLimit`` instead, so a statement that is only slow gets through.
    static let quickLimit: Duration = .seconds(1)
    /// The longest a connection may take to be made (TCP, TLS, login): postgres-nio bounds the TCP connect
    /// only, and a connection whose peer went silent after it accepted would wait for ever.
    static let connectLimit: Duration = .seconds(2)
    /// The wait before the next attempt after a silent connection (the silence took its bound already).
    static let retryAfterSilence: Duration = .milliseconds(50)

    /// Connects within ``connectLimit``; a connection made after the bound is closed.
    ///
    /// - Throws: ``SyncTimeout`` past the bound, and the connection's errors.
    static func connect(
        _ configuration: SyncConfiguration, password: String?, logger: Logger
    ) async throws -> SyncDatabase {
        try await withLimit(
            connectLimit, timeout: SyncTimeout(limit: connectLimit, connecting: true), onTimeout: {},
            abandoned: { late in await late.close() },
            { try await SyncDatabase.connect(configuration, password: password, logger: logger) })
    }

    /// Runs one round trip to the database; past `limit` (``statementLimit`` unless said) the connection is
    /// closed and the call fails with ``SyncTimeout`` (a connection whose server went away, or whose network
    /// went silent, does not always fail its queries).
    func bounded<T: Sendable>(
        _ database: SyncDatabase, limit: Duration? = nil, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let limit = limit ?? statementLimit.withLock { $0 }
        return try await Self.withLimit(
            limit, timeout: SyncTimeout(limit: limit), onTimeout: { await database.close() }, abandoned: { _ in }, body)
    }

    /// Runs `body`; past `limit` it is cancelled, `onTimeout` runs and the call throws `timeout`. A value
    /// `body` gives after that goes to `abandoned`.
    static func withLimit<T: Sendable>(
        _ limit: Duration, timeout: SyncTimeout, onTimeout: @escaping @Sendable () async -> Void,
        abandoned: @escaping @Sendable (T) async -> Void, _ body: @escaping @Sendable () async throws -> T
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
                    if claim() { continuation.resume(returning: value) } else { await abandoned(value) }
                } catch {
                    if claim() { continuation.resume(throwing: error) }
                }
            }
            timer = Task { [work] in
                do { try await Task.sleep(for: limit) } catch { return }
                guard claim() else { return }
                work?.cancel()
                await onTimeout()
                continuation.resume(throwing: timeout)
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
