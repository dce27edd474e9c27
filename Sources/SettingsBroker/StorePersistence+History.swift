// SPDX-License-Identifier: Apache-2.0

import CSQLite
import DBus
import Dispatch
import Glibc
import SettingsModel

/// How much history of commits the broker keeps (`settings-broker --history-limit`, `--history-age`).
public struct HistoryLimits: Sendable, Hashable {
    /// The most commits kept; 0 keeps none (history off).
    public var commits: Int
    /// The oldest commit kept, in seconds; 0 for no age limit.
    public var ageSeconds: Int64

    /// Makes limits.
    public init(commits: Int = HistoryLimits.defaultCommits, ageSeconds: Int64 = HistoryLimits.defaultAgeSeconds) {
        self.commits = max(0, commits)
        self.ageSeconds = max(0, ageSeconds)
    }

    /// 10,000 commits: months of a desktop's own changes, a few MiB at most.
    public static let defaultCommits = 10_000
    /// 30 days.
    public static let defaultAgeSeconds: Int64 = 30 * 24 * 3600

    /// No history.
    public static let off = HistoryLimits(commits: 0, ageSeconds: 0)

    /// Whether commits are recorded.
    public var isOn: Bool { commits > 0 }
}

/// What a commit that changed user values records in the history: when, and each key's value before it (the
/// values after it are the changeset's writes).
struct HistoryEntry: Sendable {
    /// Microseconds since the epoch, when the changeset was accepted.
    var time: Int64
    /// Per write of the changeset, in the same order: why its values are left out ("" when kept) and the
    /// user value it had before; nil for a write that left the user value as it was (not recorded).
    var before: [(omitted: String, old: DBusValue?)?]

    /// A commit of more keys than this keeps them without their values (`omitted` "large").
    static let valueLimit = 1024
    /// A value larger than this (in bytes, about) is not kept either (`omitted` "large"): the history is
    /// for settings a person changes, not a second copy of large blobs.
    static let valueSizeLimit = 16 * 1024

    /// The wall clock, in microseconds since the epoch.
    static func now() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec) * 1_000_000 + Int64(spec.tv_nsec) / 1000
    }
}

/// The history of commits in the store file: table `history`, one row per key a commit changed, and
/// `history_writers`, the process behind each writer's unique name. Bounded by ``HistoryLimits``, pruned in
/// the transaction of each commit.
///
/// The serials and times of the commits kept are also in memory (at most ``HistoryLimits/commits`` pairs),
/// read from the file at the first commit, so that pruning is one `DELETE` of the oldest serials, never a count.
final class HistoryLog: Sendable {
    struct State {
        var limits = HistoryLimits()
        /// The commits kept, oldest first (from `head` on); nil until read from the file.
        var kept: [(serial: UInt64, time: Int64)]?
        var head = 0
    }
    let state = Locked(State())

    var limits: HistoryLimits {
        get { state.withLock { $0.limits } }
    }

    func configure(_ limits: HistoryLimits) {
        state.withLock { $0.limits = limits }
    }

    /// Makes the history's tables if they are missing (format 3).
    static func prepare(_ db: SQLiteConnection) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS history (
                serial INTEGER NOT NULL, key TEXT NOT NULL, time INTEGER NOT NULL, origin TEXT NOT NULL,
                omitted TEXT NOT NULL DEFAULT '', old_type TEXT, old_value TEXT, new_type TEXT, new_value TEXT,
                PRIMARY KEY (serial, key)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS history_writers (
                origin TEXT PRIMARY KEY NOT NULL, pid INTEGER NOT NULL, process TEXT NOT NULL) WITHOUT ROWID;
            """)
    }

    static let insertRow = """
        INSERT OR REPLACE INTO history (serial, key, time, origin, omitted, old_type, old_value, new_type, new_value)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Records the batch's commits that changed user values and prunes what the limits no longer keep; in
    /// the batch's transaction.
    func record(_ batch: [ResolvedChangeset], _ db: SQLiteConnection) throws {
        let limits = self.limits
        guard limits.isOn, batch.contains(where: { $0.history != nil }) else { return }
        try state.withLock { state in
            if state.kept == nil {
                var kept: [(serial: UInt64, time: Int64)] = []
                try db.rows("SELECT serial, MIN(time) FROM history GROUP BY serial ORDER BY serial") { row throws(SQLiteError) in
                    kept.append((UInt64(bitPattern: row.integer(0)), row.integer(1)))
                }
                state.kept = kept
                state.head = 0
            }
            var latest: Int64 = 0
            for changeset in batch {
                guard let entry = changeset.history else { continue }
                latest = max(latest, entry.time)
                let serial = SQLiteArgument.integer(Int64(bitPattern: changeset.serial))
                for (write, before) in zip(changeset.writes, entry.before) {
                    guard let before else { continue }
                    let keep = before.omitted.isEmpty
                    try db.execute(Self.insertRow, [
                        serial, .text(write.key.rawValue), .integer(entry.time), .text(changeset.origin),
                        .text(before.omitted),
                        .nullable(keep ? before.old?.type.signatureText : nil),
                        .nullable(keep ? before.old.map { GVariantText.format($0) } : nil),
                        .nullable(keep ? write.value?.type.signatureText : nil),
                        .nullable(keep ? write.value.map { GVariantText.format($0) } : nil),
                    ])
                }
                state.kept!.append((changeset.serial, entry.time))
            }
            // Pruned: the oldest commits beyond the count, and those older than the age.
            var pruneThrough: UInt64?
            let oldest = limits.ageSeconds > 0 ? latest - limits.ageSeconds * 1_000_000 : Int64.min
            while state.head < state.kept!.count,
                state.kept!.count - state.head > limits.commits || state.kept![state.head].time < oldest
            {
                pruneThrough = state.kept![state.head].serial
                state.head += 1
            }
            if let pruneThrough {
                try db.execute("DELETE FROM history WHERE serial <= ?", [.integer(Int64(bitPattern: pruneThrough))])
            }
            if state.head > 1024 && state.head * 2 > state.kept!.count {
                state.kept!.removeFirst(state.head)
                state.head = 0
            }
        }
    }

    /// Forgets what is in memory (a transaction failed): read again from the file at the next commit.
    func forget() {
        state.withLock { $0.kept = nil }
    }
}

extension StorePersistence {
    /// Records the process behind a writer's unique name, for the history (off the commits' path).
    func recordWriter(origin: String, pid: UInt32, process: String) async {
        guard let database, history.limits.isOn else { return }
        _ = try? await database.perform { db in
            try db.execute(
                "INSERT OR REPLACE INTO history_writers (origin, pid, process) VALUES (?, ?, ?)",
                [.text(origin), .integer(Int64(pid)), .text(process)])
        }
    }

    /// The kept commits a `History` request asks for, oldest first, read on a connection of their own.
    func readHistory(_ request: Settings1.HistoryRequest) async throws(SettingsError) -> [Settings1.HistoryReply.Commit] {
        let path = self.path
        let result: Result<[Settings1.HistoryReply.Commit], any Error> = await handOff { deliver in
            DispatchQueue.global(qos: .userInitiated).async {
                deliver(Result { try Self.readHistory(request, path: path) })
            }
        }
        do {
            return try result.get()
        } catch {
            throw .storeFailure("cannot read the history in the settings store \(path): \(error)")
        }
    }

    private static func readHistory(
        _ request: Settings1.HistoryRequest, path: String
    ) throws -> [Settings1.HistoryReply.Commit] {
        let database = try SQLiteDatabase(path: path, readOnly: true)
        defer { try? database.close() }
        return try database.use { db in
            guard try db.integer("SELECT COUNT(*) FROM sqlite_master WHERE name = 'history'") == 1 else { return [] }
            // The location as a range of keys (a directory) or one key.
            var filter = "h.serial > ? AND h.time >= ?"
            var arguments: [SQLiteArgument] = [
                .integer(Int64(bitPattern: request.sinceSerial)), .integer(request.sinceTime),
            ]
            switch request.location {
            case .key(let key):
                filter += " AND h.key = ?"
                arguments.append(.text(key.rawValue))
            case .directory(let directory) where directory != .root:
                // Keys under `/a/b/` are those from `/a/b/` up to `/a/b0` (`0` follows `/`), in byte order.
                filter += " AND h.key >= ? AND h.key < ?"
                arguments.append(.text(directory.rawValue))
                arguments.append(.text(String(directory.rawValue.dropLast()) + "0"))
            case .directory:
                break
            }
            var from: Int64 = 0
            if request.limit > 0 {
                var serials: [Int64] = []
                try db.rows(
                    "SELECT DISTINCT h.serial FROM history h WHERE \(filter) ORDER BY h.serial DESC LIMIT ?",
                    arguments + [.integer(Int64(request.limit))]
                ) { row throws(SQLiteError) in serials.append(row.integer(0)) }
                guard let first = serials.last else { return [] }
                from = first
            }
            var commits: [Settings1.HistoryReply.Commit] = []
            var types: [String: DBusType] = [:]
            func value(_ row: SQLiteRow, _ typeColumn: Int32, _ valueColumn: Int32) -> DBusValue? {
                guard let typeText = row.optionalText(typeColumn), let text = row.optionalText(valueColumn) else {
                    return nil
                }
                let type: DBusType
                if let known = types[typeText] {
                    type = known
                } else {
                    guard let parsed = try? DBusType(parsing: typeText) else { return nil }
                    types[typeText] = parsed
                    type = parsed
                }
                return try? GVariantText.parse(text, as: type)
            }
            try db.rows(
                """
                SELECT h.serial, h.key, h.time, h.origin, h.omitted, h.old_type, h.old_value, h.new_type, h.new_value,
                    w.pid, w.process
                FROM history h LEFT JOIN history_writers w ON w.origin = h.origin
                WHERE \(filter) AND h.serial >= ? ORDER BY h.serial, h.key
                """,
                arguments + [.integer(from)]
            ) { row throws(SQLiteError) in
                let serial = UInt64(bitPattern: row.integer(0))
                let change = Settings1.HistoryReply.Change(
                    key: row.text(1), omitted: row.text(4), old: value(row, 5, 6), new: value(row, 7, 8))
                if commits.last?.serial == serial {
                    commits[commits.count - 1].changes.append(change)
                } else {
                    commits.append(
                        Settings1.HistoryReply.Commit(
                            serial: serial, time: row.integer(2), writer: row.text(3), process: row.text(10),
                            pid: UInt32(truncatingIfNeeded: row.integer(9)), changes: [change]))
                }
            }
            return commits
        }
    }
}
