// SPDX-License-Identifier: Apache-2.0

import DBus
import Dispatch
import Glibc
import SettingsModel

/// How much history of commits the broker keeps (`settings-broker --history-limit`, `--history-age`,
/// `--history-size`).
public struct HistoryLimits: Sendable, Hashable {
    /// The most commits kept; 0 keeps none (history off).
    public var commits: Int
    /// The oldest commit kept, in seconds; 0 for no age limit.
    public var ageSeconds: Int64
    /// The most bytes the kept commits' rows take (their keys, writers and values as text, and a few bytes
    /// each; ``HistoryLog/rowOverhead``); 0 for no size limit.
    public var bytes: Int

    /// Makes limits.
    public init(
        commits: Int = HistoryLimits.defaultCommits, ageSeconds: Int64 = HistoryLimits.defaultAgeSeconds,
        bytes: Int = HistoryLimits.defaultBytes
    ) {
        self.commits = max(0, commits)
        self.ageSeconds = max(0, ageSeconds)
        self.bytes = max(0, bytes)
    }

    /// 10,000 commits: months of a desktop's own changes.
    public static let defaultCommits = 10_000
    /// 30 days.
    public static let defaultAgeSeconds: Int64 = 30 * 24 * 3600
    /// 4 MiB: the history takes a few MiB of the store file at most, whatever the size of the values written.
    public static let defaultBytes = 4 << 20

    /// No history.
    public static let off = HistoryLimits(commits: 0, ageSeconds: 0)

    /// Whether commits are recorded.
    public var isOn: Bool { commits > 0 }

    /// The most bytes one commit's values may take in the history: a quarter of ``bytes``. A larger commit keeps
    /// its keys without values (`omitted` "large"), so that one commit never pushes the rest out.
    var commitBytes: Int { bytes > 0 ? max(1, bytes / 4) : Int.max }
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
/// The serial, time, size and writer of each commit kept are also in memory (at most
/// ``HistoryLimits/commits`` of them), read from the file at the first commit, so that pruning is one `DELETE`
/// of the oldest serials, never a count or a sum. A writer no kept commit names any more loses its row of
/// `history_writers` when its last commit is pruned; the rows of writers that never changed a value (their
/// first write changed nothing) are swept once ``writerSweep`` of them were added.
final class HistoryLog: Sendable {
    /// One commit kept.
    struct Kept {
        var serial: UInt64
        var time: Int64
        /// What its rows take (``Row/bytes(origin:)``).
        var bytes: Int
        var origin: String
    }

    struct State {
        var limits = HistoryLimits()
        /// The commits kept, oldest first (from `head` on); nil until read from the file.
        var kept: [Kept]?
        var head = 0
        /// The bytes of the commits kept.
        var bytes = 0
        /// The number of commits kept per writer.
        var origins: [String: Int] = [:]
        /// Rows written to `history_writers` since it was last swept.
        var writersAdded = 0
    }
    let state = Locked(State())

    /// The bytes a row takes besides its texts: its serial, time and the record's header, about.
    static let rowOverhead = 24
    /// `history_writers` is swept of writers no kept commit names after this many rows were added to it.
    static let writerSweep = 64

    var limits: HistoryLimits {
        get { state.withLock { $0.limits } }
    }

    func configure(_ limits: HistoryLimits) {
        state.withLock { $0.limits = limits }
    }

    /// Notes a row added to `history_writers`, for the next sweep.
    func noteWriterAdded() {
        state.withLock { $0.writersAdded += 1 }
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

    /// One key's row of a commit, its values as text.
    struct Row {
        var key: String
        var omitted: String
        var oldType: String?
        var oldValue: String?
        var newType: String?
        var newValue: String?

        init(key: String, omitted: String, old: DBusValue?, new: DBusValue?) {
            self.key = key
            self.omitted = omitted
            if omitted.isEmpty {
                oldType = old?.type.signatureText
                oldValue = old.map { GVariantText.format($0) }
                newType = new?.type.signatureText
                newValue = new.map { GVariantText.format($0) }
            }
        }

        /// What the row takes in the file, about: its texts and ``HistoryLog/rowOverhead``. The same sum as
        /// ``HistoryLog/rowBytesSQL``.
        func bytes(origin: String) -> Int {
            HistoryLog.rowOverhead + key.utf8.count + origin.utf8.count + omitted.utf8.count
                + (oldType?.utf8.count ?? 0) + (oldValue?.utf8.count ?? 0) + (newType?.utf8.count ?? 0)
                + (newValue?.utf8.count ?? 0)
        }

        /// Leaves the values out, for `reason`.
        mutating func omit(_ reason: String) {
            guard omitted.isEmpty else { return }
            omitted = reason
            (oldType, oldValue, newType, newValue) = (nil, nil, nil, nil)
        }
    }

    /// ``Row/bytes(origin:)`` of a row of `history`, in SQL.
    static let rowBytesSQL = """
        \(rowOverhead) + length(CAST(key AS BLOB)) + length(CAST(origin AS BLOB)) + length(CAST(omitted AS BLOB))
            + IFNULL(length(CAST(old_type AS BLOB)), 0) + IFNULL(length(CAST(old_value AS BLOB)), 0)
            + IFNULL(length(CAST(new_type AS BLOB)), 0) + IFNULL(length(CAST(new_value AS BLOB)), 0)
        """

    /// Reads the commits kept from the file (at the first commit, or after a failed transaction).
    private static func load(_ state: inout State, _ db: SQLiteConnection) throws {
        var kept: [Kept] = []
        var origins: [String: Int] = [:]
        var bytes = 0
        try db.rows(
            "SELECT serial, MIN(time), MIN(origin), SUM(\(rowBytesSQL)) FROM history GROUP BY serial ORDER BY serial"
        ) { row throws(SQLiteError) in
            let commit = Kept(
                serial: UInt64(bitPattern: row.integer(0)), time: row.integer(1), bytes: Int(row.integer(3)),
                origin: row.text(2))
            kept.append(commit)
            origins[commit.origin, default: 0] += 1
            bytes += commit.bytes
        }
        state.kept = kept
        state.head = 0
        state.bytes = bytes
        state.origins = origins
        // The writers' table is swept at the next pruning (it may hold writers of commits pruned before).
        state.writersAdded = writerSweep
    }

    /// Records the batch's commits that changed user values and prunes what the limits no longer keep; in
    /// the batch's transaction.
    func record(_ batch: [ResolvedChangeset], _ db: SQLiteConnection) throws {
        try forgetValues(ofKeysRegisteredSecretIn: batch, db)
        let limits = self.limits
        guard limits.isOn, batch.contains(where: { $0.history != nil }) else { return }
        try state.withLock { state in
            if state.kept == nil { try Self.load(&state, db) }
            var latest: Int64 = 0
            for changeset in batch {
                guard let entry = changeset.history else { continue }
                latest = max(latest, entry.time)
                var rows: [Row] = []
                for (write, before) in zip(changeset.writes, entry.before) {
                    guard let before else { continue }
                    rows.append(Row(key: write.key.rawValue, omitted: before.omitted, old: before.old, new: write.value))
                }
                var bytes = rows.reduce(0) { $0 + $1.bytes(origin: changeset.origin) }
                if bytes > limits.commitBytes {
                    for index in rows.indices { rows[index].omit("large") }
                    bytes = rows.reduce(0) { $0 + $1.bytes(origin: changeset.origin) }
                }
                let serial = SQLiteArgument.integer(Int64(bitPattern: changeset.serial))
                for row in rows {
                    try db.execute(Self.insertRow, [
                        serial, .text(row.key), .integer(entry.time), .text(changeset.origin), .text(row.omitted),
                        .nullable(row.oldType), .nullable(row.oldValue), .nullable(row.newType), .nullable(row.newValue),
                    ])
                }
                state.kept!.append(Kept(serial: changeset.serial, time: entry.time, bytes: bytes, origin: changeset.origin))
                state.bytes += bytes
                state.origins[changeset.origin, default: 0] += 1
            }
            // Pruned: the oldest commits beyond the count, those older than the age, and the oldest while the
            // kept ones take more than the size.
            var pruneThrough: UInt64?
            var unnamed: [String] = []
            let oldest = limits.ageSeconds > 0 ? latest - limits.ageSeconds * 1_000_000 : Int64.min
            while state.head < state.kept!.count,
                state.kept!.count - state.head > limits.commits || state.kept![state.head].time < oldest
                    || (limits.bytes > 0 && state.bytes > limits.bytes)
            {
                let pruned = state.kept![state.head]
                pruneThrough = pruned.serial
                state.bytes -= pruned.bytes
                state.head += 1
                let left = (state.origins[pruned.origin] ?? 1) - 1
                if left > 0 {
                    state.origins[pruned.origin] = left
                } else {
                    state.origins[pruned.origin] = nil
                    unnamed.append(pruned.origin)
                }
            }
            if let pruneThrough {
                try db.execute("DELETE FROM history WHERE serial <= ?", [.integer(Int64(bitPattern: pruneThrough))])
            }
            // The writers no kept commit names.
            if state.writersAdded >= Self.writerSweep {
                try db.execute("DELETE FROM history_writers WHERE origin NOT IN (SELECT origin FROM history)")
                state.writersAdded = 0
            } else {
                for origin in unnamed {
                    try db.execute("DELETE FROM history_writers WHERE origin = ?", [.text(origin)])
                }
            }
            if state.head > 1024 && state.head * 2 > state.kept!.count {
                state.kept!.removeFirst(state.head)
                state.head = 0
            }
        }
    }

    /// Removes from the history the values of the keys the batch registers as secret (a key made secret after
    /// it had values): their rows keep the keys, `omitted` "secret". In the batch's transaction, whether the
    /// history is on or not (it may hold rows from when it was). One statement per batch and per 500 keys;
    /// registrations of secret keys are rare, and the history small.
    private func forgetValues(ofKeysRegisteredSecretIn batch: [ResolvedChangeset], _ db: SQLiteConnection) throws {
        let keys = batch.flatMap { $0.registrations.lazy.filter(\.schema.isSecret).map(\.key.rawValue) }
        guard !keys.isEmpty else { return }
        for start in stride(from: 0, to: keys.count, by: 500) {
            let piece = keys[start..<min(keys.count, start + 500)]
            try db.execute(
                """
                UPDATE history SET omitted = 'secret', old_type = NULL, old_value = NULL, new_type = NULL,
                    new_value = NULL
                WHERE omitted = '' AND key IN (\(Array(repeating: "?", count: piece.count).joined(separator: ", ")))
                """, piece.map { .text($0) })
        }
        // The sizes in memory are read again from the file (at once, when the batch records commits).
        forget()
    }

    /// Forgets what is in memory (a transaction failed, or rows were changed): read again from the file at the
    /// next commit.
    func forget() {
        state.withLock { $0.kept = nil }
    }
}

extension StorePersistence {
    /// Records the process behind a writer's unique name, for the history (off the commits' path).
    func recordWriter(origin: String, pid: UInt32, process: String) async {
        guard let database, history.limits.isOn else { return }
        let history = self.history
        _ = try? await database.perform { db in
            try db.execute(
                "INSERT OR REPLACE INTO history_writers (origin, pid, process) VALUES (?, ?, ?)",
                [.text(origin), .integer(Int64(pid)), .text(process)])
            history.noteWriterAdded()
        }
    }

    /// The kept commits a `History` request asks for, oldest first, read on a connection of their own: a page of
    /// at most ``SettingsModel/Settings1/HistoryReply/pageSize`` bytes (more for a single larger commit),
    /// the rest asked for from its last serial (``SettingsModel/Settings1/HistoryRequest``).
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

    /// The rows of the history read at a time.
    static let readPiece = 64

    private static func readHistory(
        _ request: Settings1.HistoryRequest, path: String
    ) throws -> [Settings1.HistoryReply.Commit] {
        let database = try SQLiteDatabase(path: path, readOnly: true)
        defer { try? database.close() }
        return try database.use { db in
            // One read transaction: the page's reads see one state of the file, whatever commits meanwhile.
            try db.step("BEGIN")
            defer { try? db.execute("COMMIT") }
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
            var from = Int64(bitPattern: request.sinceSerial &+ 1)
            if request.limit > 0 {
                var serials: [Int64] = []
                try db.rows(
                    "SELECT DISTINCT h.serial FROM history h WHERE \(filter) ORDER BY h.serial DESC LIMIT ?",
                    arguments + [.integer(Int64(request.limit))]
                ) { row throws(SQLiteError) in serials.append(row.integer(0)) }
                guard let first = serials.last else { return [] }
                from = first
            }
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
            // A page: the commits read in order, each added once its last row is read, until the next would
            // take the page over its size (the first is added whatever its size). The rows are read a few at a
            // time, so that the file is read no further than the page.
            var commits: [Settings1.HistoryReply.Commit] = []
            var pageBytes = 0
            var current: Settings1.HistoryReply.Commit?
            var full = false
            func finish() {
                guard let commit = current else { return }
                current = nil
                let size = Settings1.HistoryReply.approximateSize(of: commit)
                if !commits.isEmpty && pageBytes + size > Settings1.HistoryReply.pageSize {
                    full = true
                } else {
                    commits.append(commit)
                    pageBytes += size
                }
            }
            let columns = """
                SELECT h.serial, h.key, h.time, h.origin, h.omitted, h.old_type, h.old_value, h.new_type, h.new_value,
                    w.pid, w.process
                FROM history h LEFT JOIN history_writers w ON w.origin = h.origin
                """
            var after: (serial: Int64, key: String)?
            while !full {
                var read = 0
                let position: String
                var positionArguments: [SQLiteArgument]
                if let after {
                    position = "h.serial >= ? AND (h.serial, h.key) > (?, ?)"
                    positionArguments = [.integer(after.serial), .integer(after.serial), .text(after.key)]
                } else {
                    position = "h.serial >= ?"
                    positionArguments = [.integer(from)]
                }
                try db.rows(
                    "\(columns) WHERE \(filter) AND \(position) ORDER BY h.serial, h.key LIMIT \(Self.readPiece)",
                    arguments + positionArguments
                ) { row throws(SQLiteError) in
                    read += 1
                    guard !full else { return }
                    let serial = UInt64(bitPattern: row.integer(0))
                    let key = row.text(1)
                    after = (row.integer(0), key)
                    let change = Settings1.HistoryReply.Change(
                        key: key, omitted: row.text(4), old: value(row, 5, 6), new: value(row, 7, 8))
                    if current?.serial == serial {
                        current!.changes.append(change)
                    } else {
                        finish()
                        guard !full else { return }
                        current = Settings1.HistoryReply.Commit(
                            serial: serial, time: row.integer(2), writer: row.text(3), process: row.text(10),
                            pid: UInt32(truncatingIfNeeded: row.integer(9)), changes: [change])
                    }
                }
                if read < Self.readPiece { break }
            }
            finish()
            return commits
        }
    }
}
