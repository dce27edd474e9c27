// SPDX-License-Identifier: Apache-2.0

import CSQLite
import DBus
import Dispatch
import SettingsModel

/// How hard a commit works to survive a crash.
public enum Durability: String, Sendable, CaseIterable {
    /// Every commit is fsynced before it is acknowledged (`PRAGMA synchronous = FULL`: the write-ahead log is
    /// synced at each commit): it survives a broker crash and a machine crash.
    case full
    /// Commits are written but not fsynced one by one (`PRAGMA synchronous = NORMAL`): they survive a broker
    /// crash; a machine crash or power loss may lose the last moments of writes (never the store's consistency).
    case relaxed
}

/// The SQLite file that holds the settings, in WAL mode.
///
/// Tables: `settings(path, type, value, serial)` with each value in GVariant text and the serial of the commit
/// that wrote it; `schemas(path, …)`; `meta(name, value)` holding the `format` version and a `serial`. The
/// store's serial is the larger of `meta.serial` and the highest `settings.serial` (format 2): a commit that
/// only stores values carries its serial in their rows and leaves `meta` alone, so it writes one page fewer;
/// a commit that removes a value or registers or removes a schema also sets `meta.serial`.
///
/// Opening never fails: ``StoreOpener`` checks the file, moves a damaged one aside and restores the backup,
/// or falls back to serving read-only; ``condition`` says which happened. ``backup`` keeps `<store>.backup`.
final class StorePersistence: Sendable {
    let path: String
    let durability: Durability
    /// How the file was opened.
    let condition: StoreCondition
    /// The store's backup.
    let backup: StoreBackup
    /// The open store; nil when the store is read-only.
    let database: SQLiteDatabase?
    /// The history of commits kept in the store (``HistoryLog``).
    let history = HistoryLog()
    /// What opening read, handed over once by ``load()``.
    private let initialContents: Locked<Contents?>
    /// The lock that makes this broker the store's only owner (nil when it could not be taken because the
    /// folder cannot be written: the store is then read-only).
    private let lock: StoreLock?
    /// The file the connection has open: a commit first checks that it is still the one at ``path``.
    private let identity: Locked<StoreFiles.Identity?>
    /// What happened when the store file was found removed or replaced and was written back, for `Status`.
    let restored = Locked<String?>(nil)

    /// The layout version written in `meta`.
    ///
    /// 1: `meta.serial` is the store's serial. 2: the store's serial is the larger of `meta.serial` and the
    /// highest `settings.serial` (a broker that reads only format 1 would take a serial that went back).
    /// 3: the tables of the history of commits (``HistoryLog``), made when a store of format 2 is opened.
    static let formatVersion = 3

    /// Opens the store at `path`, creating it if needed and recovering it if it is damaged.
    ///
    /// It first makes the store's own folder if it is missing and takes the store's lock (``StoreLock``),
    /// so that of two brokers started at once on one store, on one bus or two, one opens (or creates) it and
    /// the other is refused before it touches a file.
    ///
    /// - Throws: ``SettingsError`` `StoreFailure` when another process holds the store's lock. Every other
    ///   failure to open ends in a read-only store whose ``condition`` says why.
    init(path: String, durability: Durability) throws(SettingsError) {
        var lock: StoreLock?
        if (try? StoreFiles.makeStoreDirectory(StoreFiles.directory(of: path))) != nil {
            do throws(StoreLock.Failure) {
                lock = try StoreLock.acquire(store: path)
            } catch {
                if case .held(let pid) = error {
                    throw .storeFailure(
                        "the settings store \(path) is in use by another settings-broker"
                            + (pid.map { " (pid \($0))" } ?? "") + " (it holds \(StoreLock.path(of: path))): one "
                            + "broker serves a store; stop that one, or give this one another --store")
                }
                // A lock file that cannot be made: the folder is not writable, and the store opens read-only.
            }
        }
        let opened = StoreOpener(path: path, durability: durability).open()
        StoreFiles.makePrivate(store: path)
        self.path = path
        self.durability = durability
        self.condition = opened.condition
        self.database = opened.database
        self.initialContents = Locked(opened.contents)
        self.backup = StoreBackup(storePath: path)
        self.lock = lock
        self.identity = Locked(opened.database == nil ? nil : StoreFiles.Identity(of: path))
    }

    /// Opens the store's own connection: WAL, the durability's `synchronous`, and the log and cache sizes.
    static func openWritable(_ path: String, durability: Durability) throws -> SQLiteDatabase {
        let database = try SQLiteDatabase(path: path)
        do {
            try database.use { db in try configure(db, durability: durability) }
        } catch {
            try? database.close()
            throw error
        }
        return database
    }

    /// Sets up the store's own connection: WAL, the durability's `synchronous`, the log and cache sizes.
    static func configure(_ db: SQLiteConnection, durability: Durability) throws {
        let mode = try db.text("PRAGMA journal_mode = WAL")
        guard mode == "wal" else {
            throw SQLiteError(code: SQLITE_ERROR, message: "cannot use WAL mode (the file is in \(mode ?? "no") mode)")
        }
        try db.execute("PRAGMA synchronous = \(durability == .full ? "FULL" : "NORMAL")")
        // A value written over or deleted is overwritten with zeros in the file, in its page or in the page
        // freed (a key made secret later leaves no old value to read in the file's free pages).
        try db.execute("PRAGMA secure_delete = ON")
        // Values are served from memory; SQLite's page cache only needs the pages a commit walks.
        try db.execute("PRAGMA cache_size = -\(cacheKiB)")
        // The log is kept within the file made at open (``logBytes``): folded into the store before it fills
        // that file, and cut back to it after a larger transaction.
        let pageSize = Int(try db.integer("PRAGMA page_size") ?? 4096)
        try db.execute("PRAGMA journal_size_limit = \(logBytes)")
        try db.execute("PRAGMA wal_autocheckpoint = \(logPages(pageSize: pageSize))")
    }

    /// The file is kept near the size of what it holds (`auto_vacuum = INCREMENTAL`): when a commit leaves
    /// more than an eighth of the file's pages free (and at least ``freePagesReturned`` of them), the same
    /// transaction gives them back to the file system. Two reads of the file's header per commit; the pages
    /// moved and the file cut only after large deletions (old history, large values replaced).
    static func returnFreePages(_ db: SQLiteConnection) throws {
        let free = try db.integer("PRAGMA freelist_count") ?? 0
        guard free >= freePagesReturned else { return }
        let pages = try db.integer("PRAGMA page_count") ?? 0
        guard free * 8 >= pages else { return }
        try db.execute("PRAGMA incremental_vacuum")
    }

    /// The fewest free pages given back at once (256 KiB of 4 KiB pages).
    static let freePagesReturned: Int64 = 64

    /// Makes a store made before `auto_vacuum = INCREMENTAL` incremental, once (`VACUUM`, which also drops
    /// its free pages and the old values in them); a store that cannot be rewritten now (a full disk) is
    /// served as it is and tried again at the next start.
    static func makeIncremental(_ database: SQLiteDatabase) {
        try? database.use { db in
            guard try db.integer("PRAGMA auto_vacuum") != 2 else { return }
            try db.execute("PRAGMA auto_vacuum = INCREMENTAL")
            try db.execute("VACUUM")
        }
    }

    /// Opens a read-only connection (a backup, a copy, the check at start-up).
    static func openReadOnly(_ path: String) throws -> SQLiteDatabase {
        try SQLiteDatabase(path: path, readOnly: true)
    }

    /// The size of the write-ahead log file, made at open when it is missing and again at close
    /// (``StoreFiles/preallocate(_:bytes:like:)``), and kept: SQLite then overwrites blocks the file already has
    /// instead of appending, and an overwrite needs no change to the file's size or extents at each commit's
    /// fsync. On ext4 here a page and its frame header written and `fdatasync`ed took 112 – 120 µs over existing
    /// blocks and 180 – 217 µs appending.
    static let logBytes = 1 << 20

    /// The page cache of the store's connection, in KiB (SQLite's default is 2,000, which reading a store of
    /// 100,000 keys at start-up fills and keeps): the broker serves reads from memory, and a commit walks
    /// a few pages of each table's tree.
    static let cacheKiB = 256

    /// The log's pages after which a commit folds the log into the store (`wal_autocheckpoint`), so that
    /// the log starts again from its beginning before it outgrows ``logBytes``; a few pages are left for
    /// the commit that crosses the line.
    static func logPages(pageSize: Int) -> Int {
        max(16, (logBytes - 32) / (pageSize + 24) - 8)
    }

    /// Creates the tables if they are missing and checks the format version.
    ///
    /// - Throws: ``SettingsError`` `StoreFailure` for a store written by a newer broker; SQLite's errors.
    static func prepare(_ db: SQLiteConnection, path: String) throws {
        try db.execute(
            """
                CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS settings (
                    path TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL, value TEXT NOT NULL,
                    serial INTEGER NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS schemas (
                    path TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL, default_value TEXT NOT NULL,
                    summary TEXT, description TEXT, range_min TEXT, range_max TEXT, choices TEXT,
                    secret INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
                INSERT OR IGNORE INTO meta (name, value) VALUES ('format', \(formatVersion));
                INSERT OR IGNORE INTO meta (name, value) VALUES ('serial', 0);
                """)
        try HistoryLog.prepare(db)
        let format = Int(try db.integer("SELECT value FROM meta WHERE name = 'format'") ?? 0)
        guard format <= formatVersion else {
            throw SettingsError.storeFailure(
                "\(path) has store format \(format); this broker reads format \(formatVersion) and older: use a "
                    + "newer settings-broker")
        }
        try prepareSync(db)
        if format < formatVersion {
            // Format 1 kept the serial in `meta` alone, which format 2 reads the same way; format 3 adds the
            // history's tables, made above.
            try db.execute("UPDATE meta SET value = ? WHERE name = 'format'", [.integer(Int64(formatVersion))])
        }
    }

    /// The store's serial (see the type's documentation).
    static func serial(_ db: SQLiteConnection) throws -> UInt64 {
        let recorded = try db.integer("SELECT value FROM meta WHERE name = 'serial'") ?? 0
        let highest = try db.integer("SELECT MAX(serial) FROM settings") ?? 0
        return max(UInt64(bitPattern: recorded), UInt64(bitPattern: highest))
    }

    /// Everything in the store, as read at start-up.
    struct Contents {
        var serial: UInt64 = 0
        var values = ValueTable()
        var schemas: [SettingPath: SettingSchema] = [:]
        /// Rows that could not be read, kept untouched in the file, with the reason.
        var unreadable: [(path: String, reason: String)] = []
    }

    /// The store's contents, as read when it was opened.
    func load() async throws(SettingsError) -> Contents {
        if let contents = initialContents.withLock({ contents in
            defer { contents = nil }
            return contents
        }) {
            return contents
        }
        guard let database else { return Contents() }
        do {
            return try await database.perform { db in try StorePersistence.read(db) }
        } catch {
            throw .storeFailure("cannot read the settings store \(path): \(error)")
        }
    }

    /// Reads a whole store.
    static func read(_ db: SQLiteConnection) throws -> Contents {
        var contents = Contents()
        // The schemas are read while the values of a large store are still being made.
        let values = try readValues(db)
        let recorded = UInt64(bitPattern: try db.integer("SELECT value FROM meta WHERE name = 'serial'") ?? 0)
        try db.rows(
            "SELECT path, type, default_value, summary, description, range_min, range_max, choices, secret FROM schemas"
        ) { row throws(SQLiteError) in
            let path = row.text(0)
            do {
                contents.schemas[try SettingPath(path)] = try StorePersistence.schema(from: row)
            } catch {
                contents.unreadable.append((path, "schema: \(error)"))
            }
        }
        try readMachineLocal(db, into: &contents)
        let (rows, table) = values.finish()
        // The store's serial: the larger of this and every row's.
        contents.serial = max(recorded, rows.serial)
        contents.values = table
        contents.unreadable = rows.unreadable + contents.unreadable
        return contents
    }

    /// Reads a whole store on a read-only connection of its own, for ``StoreOpener`` to read it beside its
    /// integrity check. Not through memory mapping, though it would save a copy of each page: a read error of a
    /// mapped file is a signal that ends the process, where SQLite reports a read's error (decision 0009).
    static func readAlone(_ file: String) throws -> Contents {
        let reader = try openReadOnly(file)
        defer { try? reader.close() }
        return try reader.use { db in try read(db) }
    }

    /// User values read from the store, in the order of their paths.
    struct ValueRows {
        var keys = ContiguousArray<SettingPath>()
        var values = ContiguousArray<ValueTable.UserValue>()
        /// Whether each key sorts after the one before it (SQLite's order of the paths is their bytes' order).
        var increasing = true
        /// The largest serial of a row.
        var serial: UInt64 = 0
        /// Rows that could not be read, with the reason.
        var unreadable: [(path: String, reason: String)] = []

        /// The values as the broker keeps them: built in one pass when the keys are in order.
        var table: ValueTable {
            if increasing { return ValueTable(increasingKeys: keys, values: values) }
            var table = ValueTable(minimumCapacity: keys.count)
            for (key, value) in zip(keys, values) { table[key] = value }
            return table
        }
    }

    /// Reads the user values of every key.
    ///
    /// A large store is read by two threads, one after the other on each part of it: this one steps SQLite
    /// through the rows and copies each part's bytes (``RawRows``), a second makes the keys and values of the
    /// part before (``RowReader``). On two processors a start then takes about the longer of the two instead of
    /// both. A small store is read on this thread alone.
    static func readValues(_ db: SQLiteConnection) throws -> PendingValues {
        let count = Int(try db.integer("SELECT COUNT(*) FROM settings") ?? 0)
        let sql = "SELECT path, type, value, serial FROM settings ORDER BY path"
        guard count >= RawRows.pipelineThreshold else {
            var reader = RowReader(capacity: count)
            try db.rows(sql) { row throws(SQLiteError) in
                row.withColumns { path, type, value, serial in
                    reader.take(path: path, type: type, value: value, serial: serial)
                }
            }
            return .read(reader.rows)
        }
        let maker = RowMaker(capacity: count)
        var part = RawRows()
        try db.rows(sql) { row throws(SQLiteError) in
            row.withColumns { path, type, value, serial in part.append(path: path, type: type, value: value, serial: serial) }
            if part.count == RawRows.partRows {
                maker.make(part)
                part = RawRows()
            }
        }
        maker.make(part)
        return .making(maker)
    }

    /// User values read by ``readValues(_:)``, or still being made on another thread.
    enum PendingValues {
        case read(ValueRows)
        case making(RowMaker)

        /// The values read, once they are made, and the table the broker keeps them in.
        func finish() -> (rows: ValueRows, table: ValueTable) {
            switch self {
            case .read(let rows): (rows, rows.table)
            case .making(let maker): maker.finish()
            }
        }
    }

    private static func schema(from row: SQLiteRow) throws -> SettingSchema {
        let type = try DBusType(parsing: row.text(1))
        // An empty default_value is a key without a default (GVariant text of a value is never empty).
        let defaultText = row.text(2)
        let defaultValue = defaultText.isEmpty ? nil : try GVariantText.parse(defaultText, as: type)
        var range: SettingRange?
        if let min = row.optionalText(5), let max = row.optionalText(6) {
            range = SettingRange(min: try GVariantText.parse(min, as: type), max: try GVariantText.parse(max, as: type))
        }
        var choices: [DBusValue]?
        if let text = row.optionalText(7) {
            // Choices of the key's type, or of its element type (a set of flags).
            let parsed: DBusValue
            if case .array(let element) = type, let flags = try? GVariantText.parse(text, as: .array(element)) {
                parsed = flags
            } else {
                parsed = try GVariantText.parse(text, as: .array(type))
            }
            if case .array(_, let elements) = parsed { choices = elements }
        }
        return SettingSchema(
            type: type, defaultValue: defaultValue, summary: row.optionalText(3), description: row.optionalText(4),
            range: range, choices: choices, isSecret: row.integer(8) != 0)
    }

    /// Whether the store is served read-only: nothing is written to it.
    var isReadOnly: Bool { database == nil }

    /// What a write to a read-only store fails with.
    var readOnlyFailure: SettingsError {
        .storeFailure(
            "the settings store \(path) is read-only: \(condition.problem ?? "it cannot be written"). Fix "
                + "that, then restart settings-broker")
    }

    /// Writes a group of changesets in one transaction (one fsync in full durability).
    ///
    /// - Parameter waitingForLocks: false to return false at once, having written nothing, when another
    ///   connection to the file (another program) holds its write lock; true to wait for it (up to the
    ///   busy timeout, then fail).
    /// - Returns: whether the batch was written.
    /// - Throws: ``SettingsError`` `StoreFailure` when the store is read-only or the transaction fails (a
    ///   full disk, an I/O error); nothing of the batch is then stored.
    ///
    /// It blocks until the transaction is durable: the store calls it on its commit queue or, for a small
    /// batch, on the connection's thread; never from a task.
    @discardableResult
    func commit(
        _ batch: [ResolvedChangeset], sync: SyncRecord? = nil, waitingForLocks: Bool = true
    ) throws(SettingsError) -> Bool {
        guard let last = batch.last else { return true }
        guard let database else {
            // A commit that only announces what the administrator's layer changed has nothing to write: it is
            // made in memory alone, so that the readers of a read-only store still hear of the change.
            if batch.allSatisfy(\.onlyAnnounces) { return true }
            throw readOnlyFailure
        }
        try ensureInPlace(database)
        let write = { (db: SQLiteConnection) throws in
            // Whether the last serial is left in no row: then `meta` records it (see the type's note).
            var serialNeedsMeta = false
            for changeset in batch {
                serialNeedsMeta =
                    serialNeedsMeta || changeset.writes.isEmpty || !changeset.registrations.isEmpty
                    || !changeset.unregistrations.isEmpty
                for write in changeset.writes {
                    if let value = write.value {
                        try db.execute(Self.upsertValue, [
                            .text(write.key.rawValue), .text(value.type.signatureText),
                            .text(GVariantText.format(value)), .integer(Int64(bitPattern: changeset.serial)),
                        ])
                    } else {
                        try db.execute("DELETE FROM settings WHERE path = ?", [.text(write.key.rawValue)])
                        serialNeedsMeta = true
                    }
                }
                for registration in changeset.registrations {
                    try StorePersistence.insert(registration.schema, at: registration.key.rawValue, db)
                }
                for key in changeset.unregistrations {
                    try db.execute("DELETE FROM schemas WHERE path = ?", [.text(key.rawValue)])
                }
            }
            if let sync { try Self.write(sync, db) }
            try self.history.record(batch, db)
            if serialNeedsMeta {
                try db.execute(
                    "UPDATE meta SET value = ? WHERE name = 'serial'", [.integer(Int64(bitPattern: last.serial))])
            }
            try Self.returnFreePages(db)
        }
        // Changes pulled from other machines, alone in a batch, are not fsynced one by one even in full
        // durability: the database keeps them, and their cursor is in the same transaction, so a commit lost
        // to a power cut is pulled again. The next durable commit's fsync takes them to disk too.
        let relaxed = durability == .full && batch.allSatisfy { $0.remote != nil }
        do {
            if relaxed { try database.use { db in try db.execute("PRAGMA synchronous = NORMAL") } }
            defer { if relaxed { try? database.use { db in try db.execute("PRAGMA synchronous = FULL") } } }
            if waitingForLocks {
                try database.transaction(write)
            } else {
                guard try database.transactionIfUnlocked(write) != nil else { return false }
            }
        } catch {
            history.forget()
            throw .storeFailure("cannot write to the settings store \(path): \(StoreOpener.describe(error))")
        }
        backup.noteCommit(serial: last.serial)
        return true
    }

    // MARK: - A store removed or replaced while the broker runs

    /// Checks that the file at ``path`` is still the one the connection has open (one `stat`), and writes the
    /// store back when it is not: a cleanup script or a user who removed the store's folder, or put another
    /// file in its place, while the broker ran.
    ///
    /// The connection still has the removed file open, with every acknowledged commit in it: SQLite's backup
    /// copies it to a new file, which is synced and renamed into place (a file that replaced the store is
    /// first moved aside as `<store>.replaced-<time>`, never deleted), the lock is taken again on a new lock
    /// file if it went too, and the connection reopens on the new file. Nothing acknowledged is lost, and the
    /// commit that noticed goes on.
    ///
    /// - Throws: ``SettingsError`` `StoreFailure` when the store cannot be written back; the commit is
    ///   refused, and the next one tries again.
    private func ensureInPlace(_ database: SQLiteDatabase) throws(SettingsError) {
        guard let expected = identity.withLock({ $0 }) else { return }
        let found = StoreFiles.Identity(of: path)
        guard found != expected else { return }
        let what = found == nil ? "was removed" : "was replaced by another file"
        do {
            let aside = try writeBack(database, replaced: found != nil)
            let note =
                "the settings store \(path) \(what) while the broker ran; it was written back from the broker's "
                + "open copy at \(StoreFiles.timestamp())" + (aside.map { ", and the other file was moved to \($0)" } ?? "")
            restored.withLock { $0 = note }
        } catch {
            throw .storeFailure(
                "the settings store \(path) \(what) while the broker ran, and writing it back failed: "
                    + "\(StoreOpener.describe(error)); writes are refused until it can be written back")
        }
    }

    /// Writes the open store back to ``path`` (see ``ensureInPlace(_:)``); returns where a replacing file went.
    private func writeBack(_ database: SQLiteDatabase, replaced: Bool) throws -> String? {
        try StoreFiles.makeStoreDirectory(StoreFiles.directory(of: path))
        if let lock, !lock.isInPlace {
            do throws(StoreLock.Failure) {
                try lock.renew()
            } catch {
                switch error {
                case .held(let pid):
                    throw StoreFiles.Failure("another settings-broker\(pid.map { " (pid \($0))" } ?? "") took the store")
                case .unusable(let reason):
                    throw StoreFiles.Failure(reason)
                }
            }
        }
        // Only the file that took the store's place moves: a `-wal` and `-shm` at the path are still the open
        // store's, which closing it removes.
        var aside: String?
        if replaced {
            let target = "\(path).replaced-\(StoreFiles.timestamp())"
            try StoreFiles.rename(path, to: target)
            aside = target
        }
        let building = path + ".restoring"
        try database.reopen(
            beforeClosing: { db in
                StoreFiles.removeIfPresent(building)
                StoreFiles.removeIfPresent(building + "-journal")
                let copy = try SQLiteDatabase(path: building)
                do {
                    try copy.use { target in
                        try db.backup(to: target)
                        try target.execute("PRAGMA journal_mode = DELETE")
                    }
                    try copy.close()
                    try StoreFiles.sync(building)
                } catch {
                    try? copy.close()
                    StoreFiles.removeIfPresent(building)
                    throw error
                }
            },
            afterClosing: {
                // Closing the old connection removed its `-wal` and `-shm` if they were still at the path.
                StoreFiles.removeIfPresent(path + "-shm")
                try StoreFiles.rename(building, to: path)
                StoreFiles.syncDirectory(of: path)
            },
            configure: { db in try Self.configure(db, durability: durability) })
        identity.withLock { $0 = StoreFiles.Identity(of: path) }
        return aside
    }

    /// The connection's `PRAGMA synchronous`: 2 (FULL) for ``Durability/full``, 1 (NORMAL) for
    /// ``Durability/relaxed``; nil when the store is read-only.
    func synchronousLevel() async -> Int? {
        guard let database else { return nil }
        return try? await database.perform { db in try db.integer("PRAGMA synchronous").map(Int.init) }
    }

    /// Closes the store's connection, which folds the write-ahead log into the store file. Commits after
    /// this fail with `StoreFailure`.
    ///
    /// SQLite deletes the log when its last connection closes. It is made again here, before the store's lock
    /// is released: the next start then finds it and answers sooner (making it writes and syncs 1 MiB, about
    /// 20 ms of a start here). A log whose header is zero holds no commits, so the file is a valid store as it is.
    func close() {
        if let database {
            try? database.close()
            StoreFiles.preallocate(path + "-wal", bytes: Self.logBytes, like: path)
        }
        lock?.release()
    }

    /// Stores one value (the statement is prepared once per connection).
    static let upsertValue = """
        INSERT INTO settings (path, type, value, serial) VALUES (?, ?, ?, ?)
        ON CONFLICT(path) DO UPDATE SET type = excluded.type, value = excluded.value, serial = excluded.serial
        """

    private static func insert(_ schema: SettingSchema, at path: String, _ db: SQLiteConnection) throws {
        let type = schema.type
        let choices = schema.choices.map { GVariantText.format(.array(schema.choiceType, $0)) }
        try db.execute(
            """
            INSERT OR REPLACE INTO schemas
            (path, type, default_value, summary, description, range_min, range_max, choices, secret)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .text(path), .text(type.signatureText), .text(schema.defaultValue.map { GVariantText.format($0) } ?? ""),
                .nullable(schema.summary), .nullable(schema.description),
                .nullable(schema.range.map { GVariantText.format($0.min) }),
                .nullable(schema.range.map { GVariantText.format($0.max) }), .nullable(choices),
                .integer(schema.isSecret ? 1 : 0),
            ])
        try recordMachineLocal(schema, at: path, db)
    }
}

extension SQLiteRow {
    /// The bytes of a `settings` row's path, type and value as SQLite holds them, and its serial, valid only
    /// inside `body`.
    fileprivate func withColumns(
        _ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>, UInt64) -> Void
    ) {
        withBytes(0) { path in
            withBytes(1) { type in
                withBytes(2) { value in body(path, type, value, UInt64(bitPattern: integer(3))) }
            }
        }
    }
}

/// Makes user values from the bytes of the store's rows, in the order of their paths (see
/// ``StorePersistence/readValues(_:)``).
struct RowReader {
    private(set) var rows = StorePersistence.ValueRows()
    /// A store holds few distinct types: each type's text is parsed once, and a row of the same type as the
    /// row before it (the commonest case) is not even looked up.
    private var types: [String: DBusType] = [:]
    private var lastType: (text: [UInt8], type: DBusType)?

    init(capacity: Int) {
        rows.keys.reserveCapacity(capacity)
        rows.values.reserveCapacity(capacity)
    }

    /// Takes one row: its path, type and value as the store holds their text, and its serial.
    mutating func take(
        path pathBytes: UnsafeBufferPointer<UInt8>, type typeBytes: UnsafeBufferPointer<UInt8>,
        value valueBytes: UnsafeBufferPointer<UInt8>, serial: UInt64
    ) {
        rows.serial = max(rows.serial, serial)
        let path = String(decoding: pathBytes, as: UTF8.self)
        do {
            let type: DBusType
            if let lastType, typeBytes.elementsEqual(lastType.text) {
                type = lastType.type
            } else {
                let text = String(decoding: typeBytes, as: UTF8.self)
                type = try types[text] ?? DBusType(parsing: text)
                types[text] = type
                lastType = (Array(typeBytes), type)
            }
            // Read from the row's own bytes: most values need no `String` of them.
            let value = try CommittedState.UserValue(storedText: valueBytes, as: type, serial: serial)
            let key = try SettingPath(path)
            if rows.increasing, let last = rows.keys.last, !(last.rawValue < key.rawValue) { rows.increasing = false }
            rows.keys.append(key)
            rows.values.append(value)
        } catch {
            rows.unreadable.append((path, "\(error)"))
        }
    }
}

/// The bytes of a run of the store's rows, copied from SQLite for another thread to make values of.
struct RawRows: Sendable {
    /// Stores of fewer rows are read by one thread.
    static let pipelineThreshold = 8192
    /// Rows in each part handed from one thread to the other.
    static let partRows = 4096

    private var bytes: [UInt8] = []
    /// Where each row's path, type and value end in ``bytes``, and its serial.
    private var ends: [(path: Int, type: Int, value: Int, serial: UInt64)] = []

    init() {
        bytes.reserveCapacity(Self.partRows * 64)
        ends.reserveCapacity(Self.partRows)
    }

    var count: Int { ends.count }

    mutating func append(
        path: UnsafeBufferPointer<UInt8>, type: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>,
        serial: UInt64
    ) {
        bytes.append(contentsOf: path)
        let pathEnd = bytes.count
        bytes.append(contentsOf: type)
        let typeEnd = bytes.count
        bytes.append(contentsOf: value)
        ends.append((pathEnd, typeEnd, bytes.count, serial))
    }

    /// Hands each row to `reader`, in order.
    func read(into reader: inout RowReader) {
        bytes.withUnsafeBufferPointer { all in
            var start = 0
            for end in ends {
                reader.take(
                    path: UnsafeBufferPointer(rebasing: all[start..<end.path]),
                    type: UnsafeBufferPointer(rebasing: all[end.path..<end.type]),
                    value: UnsafeBufferPointer(rebasing: all[end.type..<end.value]),
                    serial: end.serial)
                start = end.value
            }
        }
    }
}

/// Makes the values of the parts of a store's rows on a thread of its own, one part after the other.
// @unchecked Sendable: `reader` and `order` are touched only by the jobs of the serial `queue`, and read by `finish`
// after `queue.sync` has waited for every one of them.
final class RowMaker: @unchecked Sendable {
    private let queue = DispatchQueue(label: "settings-broker.store-values", qos: .userInitiated)
    private var reader: RowReader
    /// The keys' order of the table, made last.
    private var order = SortedKeys()

    init(capacity: Int) {
        reader = RowReader(capacity: capacity)
    }

    /// Makes the values of `part` after those of the parts before it.
    func make(_ part: RawRows) {
        queue.async { part.read(into: &self.reader) }
    }

    /// The values of every part, once they are made, and their table: its keys' order is made on the maker's
    /// thread while this one makes its hash table.
    func finish() -> (rows: StorePersistence.ValueRows, table: ValueTable) {
        let rows = queue.sync { reader.rows }
        guard rows.increasing else { return (rows, rows.table) }
        queue.async { self.order = ValueTable.order(ofIncreasingKeys: rows.keys) }
        let table = ValueTable(increasingKeys: rows.keys, values: rows.values) { queue.sync { order } }
        return (rows, table)
    }
}
