// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
public import Logging
import PostgresNIO
import SettingsModel
public import SyncProtocol

/// The sync process's engine: syncs a broker's store with a PostgreSQL database shared by the user's machines
/// (docs/sync.md; decisions 0028 and 0030), through the broker's ``BrokerLink``.
///
/// One task does everything, in a loop: connect, make the tables if missing, join (the first time), then push
/// the queue and pull everything after the cursor (nothing when the push was the only change after it), and
/// wait for a hint (a local commit that queued something, which the broker signals, or another machine's NOTIFY
/// on a second connection) or ``SyncConfiguration/pullInterval``. A
/// polling engine (``SyncConfiguration/pollInterval``) instead closes its connection after each push and
/// pull, and connects again after the interval or soon after a local commit. Any failure closes the
/// connections and the loop starts again after a growing wait with jitter, up to
/// ``SyncConfiguration/longestRetry``. The broker decides what is applied; its local service never waits for
/// the engine.
public final class SyncEngine: Sendable {
    let configuration: SyncConfiguration
    let logger: Logger
    let environment: [String: String]
    let broker: BrokerLink
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
    /// Whether the session's listening connection ended after it was made: the session then ends too.
    let listenerLost = Locked(false)
    /// When the machines whose clock was clamped were last read, nil when they are to be read at the next pull.
    let clampedChecked = Locked<ContinuousClock.Instant?>(nil)

    /// The most rows of a page of a pull, which the engine lowers after a page that took longer than its
    /// bound (``pageRows``).
    static let mostPageRows = 2000
    /// The rows the next page of a pull asks for: ``mostPageRows``, a quarter of it after each page that
    /// took longer than the long bound, ``roundTripLimit`` (down to one row), doubled again after each page
    /// read: a statement's time bound never turns one page into an endless retry.
    let pageRows = Locked(SyncEngine.mostPageRows)

    struct State {
        var phase = "starting"
        var lastSync: Int64?
        /// The revision the broker's store has every row up to.
        var cursor: Int64 = 0
        /// Where the pull stopped inside the revision after ``cursor``, when it did (a revision with more rows
        /// than a page): its revision and the last key read. Kept for the process's life, not in the store.
        var inside: (revision: Int64, key: String)?
        var joined = false
        var queued = 0
        var error: String?
        var clamped: [String] = []
    }

    /// Makes the engine; nothing happens before ``start(cursor:joined:)``.
    public init(configuration: SyncConfiguration, logger: Logger, environment: [String: String], broker: BrokerLink) {
        self.configuration = configuration
        self.logger = logger
        self.environment = environment
        self.broker = broker
    }

    /// Starts syncing from `cursor`, the database's revision the broker's store has everything up to.
    public func start(cursor: Int64, joined: Bool) {
        state.withLock {
            $0.cursor = cursor
            $0.joined = joined
        }
        let running = Task { await self.run() }
        task.withLock { $0 = running }
    }

    /// The broker queued changes: sync soon.
    public func wakeUp() {
        wake.signal()
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

    /// Tells the broker the fields of `Status` the engine keeps (``SyncStatusField``).
    func report() {
        let fields = state.withLock { state in
            var fields: [String: DBusValue] = [SyncStatusField.state: .string(state.phase)]
            if let lastSync = state.lastSync { fields[SyncStatusField.last] = .int64(lastSync) }
            if let error = state.error { fields[SyncStatusField.error] = .string(error) }
            if !state.clamped.isEmpty {
                fields[SyncStatusField.clampedMachines] = .array(.string, state.clamped.map { .string($0) })
            }
            return fields
        }
        broker.report(fields)
    }

    // MARK: - The loop

    private func run() async {
        var failures = 0
        var silent = false
        report()
        while !Task.isCancelled {
            do {
                silent = false
                try await session { failures = 0 }
                // Only a polling session returns: the next one comes after the interval, or a moment after a
                // local commit queues a change.
                if let interval = configuration.pollInterval {
                    state.withLock { $0.phase = "polling" }
                    report()
                    await wake.wait(timeout: interval * Double.random(in: 1...1.25))
                    try await Task.sleep(for: configuration.pollSettle)
                    continue
                }
            } catch is CancellationError {
                break
            } catch is ChannelClosed {
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
                let changed = state.withLock { state in
                    defer {
                        state.phase = phase
                        state.error = text
                    }
                    return state.error != text || state.phase != phase
                }
                if changed {
                    report()
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
        if let configuration = error as? SyncConfigurationError { return ("error", configuration.description) }
        if let psql = error as? PSQLError {
            if let message = psql.serverInfo?[.message] {
                let code = psql.serverInfo?[.sqlState] ?? ""
                // 28xxx: invalid authorization; 3D000: no such database; 42501: permission.
                let refused = code.hasPrefix("28") || code == "3D000" || code == "42501"
                return (refused ? "error" : "offline", "\(message) (SQLSTATE \(code))")
            }
            return ("offline", "\(psql.code)")
        }
        if let broker = error as? DBusError { return ("error", "the broker refused: \(broker.message)") }
        return ("offline", "\(error)")
    }

    /// One connected session: runs until an error or cancellation.
    private func session(connected: () -> Void) async throws {
        let password = try configuration.password(environment: environment)
        notePassword(password)
        let database = try await Self.connect(configuration, password: password, logger: logger)
        defer { Task { await database.close() } }
        try await bounded(database, limit: Self.roundTripLimit) { try await database.prepare() }
        let backend = try await bounded(database) { try await database.registerMachine() }
        connected()
        let polling = configuration.pollInterval != nil
        listenerLost.withLock { $0 = false }
        let listener = polling ? nil : Task { [wake, hinted, listenerLost, logger, configuration] in
            // A second connection for the hint; one that cannot be made only means waiting for the periodic
            // pull. One that was made and then ended (the server ended the session) ends the session, so that
            // both connections are made again at once: the other may be gone too.
            let listening: SyncDatabase
            do { listening = try await Self.connect(configuration, password: password, logger: logger) } catch { return }
            defer { Task { await listening.close() } }
            try? await listening.listen(ignoring: backend) { payload in
                guard SyncDatabase.isHint(payload, forScope: configuration.scope) else { return }
                hinted.withLock { $0 = true }
                wake.signal()
            }
            guard !Task.isCancelled else { return }
            listenerLost.withLock { $0 = true }
            wake.signal()
        }
        defer { listener?.cancel() }
        if !state.withLock({ $0.joined }) {
            _ = try await broker.join()
            state.withLock { $0.joined = true }
        }
        // The last error stays in `Status` until a whole round of push and pull went well: a session that
        // connects and then fails again (a pull that never ends) shows why.
        state.withLock { $0.phase = "connected" }
        report()
        clampedChecked.withLock { $0 = nil }
        while !Task.isCancelled {
            if listenerLost.withLock({ $0 }) { throw ListenerLost() }
            let woken = hinted.withLock { hinted in
                defer { hinted = false }
                return hinted
            }
            if woken { try await pull(database) }
            let pushed = try await push(database)
            // A push that was the only change after the cursor moved the cursor: there is nothing to pull.
            if !pushed.keptUp && (!woken || pushed.count > 0) {
                try await pull(database)
            } else if pushed.keptUp {
                try await readClampedMachines(database, anyway: false)
            }
            let now = Int64(HybridLogicalClock.wallClock() >> 16)
            let queued = state.withLock { state in
                state.lastSync = now
                state.phase = "connected"
                state.error = nil
                return state.queued
            }
            report()
            // A whole round went well: statements are bounded short again (a slow one had the long bound).
            statementLimit.withLock { $0 = Self.quickLimit }
            if queued > 0 { continue }
            if polling { return }
            await wake.wait(timeout: configuration.pullInterval)
        }
        throw CancellationError()
    }

    // MARK: - Push and pull

    /// Pushes the queue, in pieces, each in one transaction of the database; returns how many changes went,
    /// and whether the cursor kept up with them.
    ///
    /// Revisions are gapless in commit order, so a push whose revision follows the cursor is the only change
    /// after it: the rows of that revision are the changes pushed, which this machine has. The cursor then
    /// moves to it with no pull (the broker records it with the acknowledgement); at the first push that does
    /// not follow, it stays, and the next pull reads what came between.
    private func push(_ database: SyncDatabase) async throws -> (count: Int, keptUp: Bool) {
        var count = 0
        var keptUp = true
        var cursor = state.withLock { $0.cursor }
        while !Task.isCancelled {
            let changes = try await broker.take(limit: 1000)
            guard !changes.isEmpty else {
                state.withLock { $0.queued = 0 }
                break
            }
            count += changes.count
            let pushed = try await bounded(database) { try await database.push(changes) }
            if pushed.clamped {
                clampedChecked.withLock { $0 = nil }
                logger.warning(
                    "sync: this machine's clock is ahead of the database's by more than the bound; its versions were clamped",
                    metadata: ["bound-ms": "\(configuration.clockBoundMilliseconds)"])
            }
            keptUp = keptUp && pushed.revision == cursor + 1
            if keptUp { cursor = pushed.revision }
            let left = try await broker.acknowledge(changes, as: pushed.versions, cursor: keptUp ? cursor : nil)
            state.withLock { state in
                state.queued = left
                // Where the broker recorded it.
                if keptUp { state.cursor = max(state.cursor, cursor) }
            }
            if left == 0 { break }
        }
        return (count, count > 0 && keptUp)
    }

    /// Pulls everything after the cursor and hands it to the broker, which applies what is newer than its
    /// versions. The cursor moves past the rows refused too (unreadable, out of bounds): the broker lists each
    /// in `Status`.
    ///
    /// Pages follow each other in (revision, key) order, each at most ``pageRows`` rows and about
    /// ``SyncDatabase/pageBytes`` of values: a revision of any number of rows is read in pages, the cursor
    /// stopping inside it (``State/inside``) while the broker's moves by whole revisions. Only the round trip
    /// of a page is bounded in time, not the reading of its rows; a page that times out makes the next ones
    /// smaller. The machines whose clock was clamped are read again after a pull that brought rows (a clamped
    /// push brings its rows), after this machine's own push was clamped, and otherwise once every
    /// ``SyncConfiguration/pullInterval``.
    private func pull(_ database: SyncDatabase) async throws {
        var pulled = false
        while !Task.isCancelled {
            let position = state.withLock { state in
                if let inside = state.inside, inside.revision > state.cursor {
                    return SyncDatabase.Position(revision: inside.revision, key: inside.key)
                }
                return SyncDatabase.Position(revision: state.cursor, key: nil)
            }
            let limit = pageRows.withLock { $0 }
            let fetched: [SyncDatabase.PulledRow]
            do {
                fetched = try await bounded(database) { try await database.pull(after: position, limit: limit) }
            } catch let timeout as SyncTimeout where timeout.limit >= Self.roundTripLimit {
                // Past the long bound, the page itself is too large (past the short one, the connection may
                // have gone silent: the next session gives the page the long bound first).
                pageRows.withLock { $0 = max(1, min($0, limit) / 4) }
                logger.warning(
                    "sync: a page of the pull took longer than its bound; the next pages are smaller",
                    metadata: ["rows": "\(limit)", "bound": "\(timeout.limit)"])
                throw timeout
            }
            let page = SyncDatabase.page(of: fetched)
            guard let end = page.end, let complete = page.complete else { break }
            pulled = true
            // The revisions every row of which the broker has once the page is applied.
            let upTo = max(complete, position.key == nil ? position.revision : position.revision - 1)
            var refused = page.refused
            for (rows, batchUpTo) in Self.batches(of: page.rows, upTo: upTo) {
                try await broker.apply(rows, refused: refused, upTo: batchUpTo)
                refused = []
            }
            state.withLock { state in
                state.cursor = max(state.cursor, upTo)
                state.inside = page.more ? (end.revision, end.key ?? "") : nil
            }
            if fetched.count >= limit { pageRows.withLock { $0 = min(Self.mostPageRows, max($0, limit * 2)) } }
            if !page.more { break }
        }
        try await readClampedMachines(database, anyway: pulled)
    }

    /// Reads the machines whose clock was clamped, when `anyway`, when this machine's own push was clamped
    /// since, or when they were read longer than ``SyncConfiguration/pullInterval`` ago.
    private func readClampedMachines(_ database: SyncDatabase, anyway: Bool) async throws {
        let now = ContinuousClock.now
        let due = clampedChecked.withLock { checked in checked.map { now - $0 >= configuration.pullInterval } ?? true }
        guard anyway || due else { return }
        let clamped = try await bounded(database) { try await database.clampedMachines() }
        clampedChecked.withLock { $0 = now }
        let changed = state.withLock { state in
            defer { state.clamped = clamped }
            return state.clamped != clamped
        }
        if changed { report() }
    }

    /// A page's rows in batches of about ``SyncCall/batchBytes`` of values, with the revision each moves the
    /// broker's cursor to: the revisions before the next batch's first row (a batch may end inside a revision,
    /// whose rows are then split between batches), and `upTo` for the last batch, past any refused rows after
    /// it. A page without rows is one empty batch.
    static func batches(of rows: [RemoteRow], upTo: Int64) -> [(rows: [RemoteRow], upTo: Int64)] {
        var batches: [(rows: [RemoteRow], upTo: Int64)] = []
        var batch: [RemoteRow] = []
        var bytes = 0
        for (index, row) in rows.enumerated() {
            batch.append(row)
            bytes += row.change.key.rawValue.utf8.count + (row.change.value?.approximateSize ?? 0)
            if bytes >= SyncCall.batchBytes && index < rows.count - 1 {
                batches.append((batch, min(upTo, rows[index + 1].revision - 1)))
                batch = []
                bytes = 0
            }
        }
        batches.append((batch, upTo))
        return batches
    }
}

/// The session's listening connection ended (the server ended it, or it failed): the session is made again.
struct ListenerLost: Error, CustomStringConvertible {
    var description: String { "the connection listening for other machines' changes was closed" }
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
