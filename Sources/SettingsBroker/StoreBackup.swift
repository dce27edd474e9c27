// SPDX-License-Identifier: Apache-2.0

// Design note: the backup, `<store>.backup`.
//
// A backup is a whole copy of the store made with SQLite's online backup API from a read-only connection of
// its own (WAL lets the broker's commits go on meanwhile), switched to a single self-contained file
// (`journal_mode = DELETE`), checked with `PRAGMA quick_check`, synced, and renamed over the previous one.
// So the file at `<store>.backup` is always complete and always a store that passed the check: a crash or a
// full disk during a backup leaves the previous one in place.
//
// When: at start-up when the backup does not hold the store's current serial (after a crash, or the first
// time), then after commits at most once per interval (15 minutes by default, counted from when the backup
// was written, so also across restarts of the broker), and at a clean shutdown when
// anything changed since the last one. Nothing is copied while nothing changes. A copy costs one read of the
// store, one write of the same size and a check, in the background: with 100,000 keys (3.3 MB) 45 ms, at
// most once a quarter of an hour, while each commit costs the same as before.

import DBus

/// Keeps the store's backup current, as the design note above describes.
final class StoreBackup: Sendable {
    /// A backup written, or one that failed.
    enum Event: Sendable {
        case written(serial: UInt64, duration: Duration)
        case failed(String)
    }

    /// The store file.
    let storePath: String
    /// The backup file.
    let path: String

    private struct State {
        /// The serial held by the backup file, if known.
        var serial: UInt64?
        /// When the backup file was written, in seconds since 1970.
        var time: Double?
        /// When the last backup was written, on the monotonic clock: by this broker, or before it started
        /// when the backup it found holds the store's serial.
        var lastRun: ContinuousClock.Instant?
        /// When the scheduled backup will be written, while one is scheduled.
        var due: ContinuousClock.Instant?
        /// After a failure (a full disk, say), no new attempt before this.
        var retryAfter: ContinuousClock.Instant?
        /// Set by ``start(interval:serial:report:)``; nil while backups are not kept.
        var interval: Duration?
        var report: (@Sendable (Event) -> Void)?
        /// The serial of the last commit.
        var committed: UInt64 = 0
        var running = false
        var timer: Task<Void, Never>?
        var stopped = false
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    /// The least time between a failed backup and the next attempt.
    static let retryDelay: Duration = .seconds(60)

    init(storePath: String) {
        self.storePath = storePath
        self.path = StoreOpener.backupPath(of: storePath)
    }

    /// The backup file, the serial it holds and when it was written; nil when there is none.
    func current() -> (path: String, serial: UInt64?, time: Double?)? {
        let (serial, time) = state.withLock { ($0.serial, $0.time) }
        if serial != nil { return (path, serial, time) }
        guard StoreFiles.exists(path) else { return nil }
        return (path, nil, StoreFiles.modificationTime(path))
    }

    /// Starts keeping the backup current: one now unless it holds `serial` already, then after commits.
    ///
    /// - Parameters:
    ///   - interval: the least time between two backups while commits go on.
    ///   - serial: the store's serial now.
    ///   - report: called with each backup written or failed (the broker logs it).
    func start(interval: Duration, serial: UInt64, report: @escaping @Sendable (Event) -> Void) {
        let existing = Self.serial(ofBackup: path)
        let time = existing == nil ? nil : StoreFiles.modificationTime(path)
        state.withLock { state in
            state.interval = interval
            state.report = report
            // Commits made before the start noted their serials already.
            state.committed = max(state.committed, serial)
            state.serial = existing
            state.time = time
            // A current backup counts as the last run, so the first commits after a start (a broker started
            // by activation, or again after an idle exit) do not copy the whole store at once.
            if existing == serial, let time {
                let age = Duration.seconds(max(0, StoreFiles.now() - time))
                state.lastRun = ContinuousClock.now - min(age, interval)
            }
        }
        schedule()
    }

    /// When the next backup is due, while one is scheduled.
    var nextDue: ContinuousClock.Instant? { state.withLock { $0.due } }

    /// Records a commit; a backup follows within the interval.
    func noteCommit(serial: UInt64) {
        state.withLock { $0.committed = max($0.committed, serial) }
        schedule()
    }

    /// Stops the schedule, waits for a backup in progress, then writes a last one if anything changed.
    func finish() async {
        let timer = state.withLock { state -> Task<Void, Never>? in
            state.stopped = true
            defer {
                state.timer = nil
                state.due = nil
            }
            return state.timer
        }
        timer?.cancel()
        await withCheckedContinuation { continuation in
            let idle = state.withLock { state -> Bool in
                if state.running { state.idleWaiters.append(continuation) }
                return !state.running
            }
            if idle { continuation.resume() }
        }
        let due = state.withLock { state -> Bool in
            guard state.interval != nil, state.serial != state.committed else { return false }
            state.running = true
            return true
        }
        if due { await run() }
    }

    /// Arms the timer for the next backup if one is due and none is armed or running.
    private func schedule() {
        state.withLock { state in
            guard let interval = state.interval, !state.stopped, !state.running, state.timer == nil,
                state.serial != state.committed
            else { return }
            let now = ContinuousClock.now
            let due = max(state.lastRun.map { $0 + interval } ?? now, state.retryAfter ?? now)
            let delay = max(.zero, due - now)
            state.due = due
            state.timer = Task { [self] in
                if delay > .zero {
                    do { try await Task.sleep(for: delay) } catch { return }
                }
                let go = self.state.withLock { state -> Bool in
                    state.timer = nil
                    state.due = nil
                    guard !state.stopped, !state.running else { return false }
                    state.running = true
                    return true
                }
                if go {
                    await run()
                    schedule()
                }
            }
        }
    }

    /// Writes one backup; `running` is set by the caller and cleared here.
    private func run() async {
        let started = ContinuousClock.now
        let event: Event
        do {
            let serial = try await write()
            state.withLock { state in
                state.serial = serial
                state.time = StoreFiles.now()
            }
            event = .written(serial: serial, duration: ContinuousClock.now - started)
        } catch {
            event = .failed(StoreOpener.describe(error))
        }
        let (report, waiters) = state.withLock { state in
            state.running = false
            state.lastRun = ContinuousClock.now
            if case .failed = event {
                state.retryAfter = ContinuousClock.now + max(state.interval ?? .zero, Self.retryDelay)
            } else {
                state.retryAfter = nil
            }
            defer { state.idleWaiters = [] }
            return (state.report, state.idleWaiters)
        }
        report?(event)
        for waiter in waiters { waiter.resume() }
    }

    /// Copies the store to the backup file; returns the serial the copy holds.
    private func write() async throws -> UInt64 {
        let source = try StorePersistence.openReadOnly(storePath)
        defer { try? source.close() }
        let (path, temporary) = (path, path + ".tmp")
        // The copy runs on a dispatch queue, not on a Swift task.
        return try await source.perform { db in
            StoreFiles.removeIfPresent(temporary)
            StoreFiles.removeIfPresent(temporary + "-journal")
            do {
                let destination = try SQLiteDatabase(path: temporary)
                defer { try? destination.close() }
                let serial = try destination.use { copy in
                    try db.backup(to: copy)
                    try copy.execute("PRAGMA journal_mode = DELETE")
                    let check = try copy.strings("PRAGMA quick_check")
                    guard check == ["ok"] else {
                        throw StoreFiles.Failure("the copy failed its integrity check: \(check.prefix(3).joined(separator: "; "))")
                    }
                    return try StorePersistence.serial(copy)
                }
                try destination.close()
                try StoreFiles.sync(temporary)
                try StoreFiles.rename(temporary, to: path)
                StoreFiles.syncDirectory(of: path)
                return serial
            } catch {
                StoreFiles.removeIfPresent(temporary)
                throw error
            }
        }
    }

    /// The serial a backup file holds; nil when it is missing or cannot be read.
    static func serial(ofBackup path: String) -> UInt64? {
        guard StoreFiles.exists(path) else { return nil }
        do {
            let database = try StorePersistence.openReadOnly(path)
            defer { try? database.close() }
            return try database.use { db in try StorePersistence.serial(db) }
        } catch {
            return nil
        }
    }
}
