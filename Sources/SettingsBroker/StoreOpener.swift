// SPDX-License-Identifier: Apache-2.0

// Design note: opening the store never crash-loops and never replaces the user's data.
//
// The file at the store's path is opened, checked with `PRAGMA quick_check` and read in full. Then one of:
//
// - It opens: health `ok`.
// - It is damaged (SQLite says "not a database" or "malformed", the integrity check fails, it is empty, or
//   the path is a directory or another non-file): the file and its `-wal` and `-shm` are renamed to
//   `<store>.damaged-<UTC time>` (never deleted), and the store is restored from `<store>.backup` if that
//   backup passes the same check (`recovered-from-backup`), else created empty (`recovered-empty`; a damaged
//   backup is moved aside the same way). The serial continues from the highest one that can still be read,
//   so it does not go back for clients when the damaged file still says how far it had gone.
// - It is missing: created empty, or restored from the backup when one exists (a store does not vanish on
//   its own: to start from nothing, `Reset /`).
// - It cannot be used for another reason (its directory cannot be created or written, the file cannot be
//   read, another process holds it locked, a newer broker wrote it, the disk is full): health `read-only`.
//   The values are read from a private copy of the store, else from the backup, else none, and every write
//   fails with `StoreFailure` until the cause is fixed and the broker restarted. The file is left as it is.
//
// A new store is built under a temporary name and renamed into place, so a crash while creating it never
// leaves an empty file that would later look truncated.

import DBus
import Dispatch
import SettingsModel

/// Opens the store file, recovering from damage as the design note above describes.
struct StoreOpener {
    let path: String
    let durability: Durability

    /// An opened store: the connection (nil when read-only), what it holds, and how it was found.
    struct Opened {
        var database: SQLiteDatabase?
        var contents: StorePersistence.Contents
        var condition: StoreCondition
    }

    /// The result of trying to open a store file as it is.
    enum Attempt {
        case opened(SQLiteDatabase, StorePersistence.Contents)
        /// The file is not a usable store: move it aside.
        case damaged(String)
        /// The file may be fine but cannot be used now: leave it alone.
        case unavailable(String)
    }

    /// The backup of the store at `path`.
    static func backupPath(of path: String) -> String { path + ".backup" }

    var backupPath: String { Self.backupPath(of: path) }

    /// Opens the store; never fails (see the design note).
    func open() -> Opened {
        let directory = StoreFiles.directory(of: path)
        do {
            try StoreFiles.makeStoreDirectory(directory)
        } catch {
            let reason = Self.obstacle(to: directory) ?? Self.describe(error)
            return readOnly("cannot create the store's directory \(directory): \(reason)", readStore: false)
        }
        switch StoreFiles.kind(of: path) {
        case .missing:
            return createOrRestore(damage: nil, serialFloor: 0)
        case .other(let kind):
            return recover(damage: "\(path) is a \(kind), not a settings store", readable: false)
        case .inaccessible(let reason):
            return readOnly("cannot examine \(path): \(reason)", readStore: false)
        case .file(size: 0):
            return recover(damage: "\(path) is empty (0 bytes): it was truncated", readable: false)
        case .file:
            switch attempt(path) {
            case .opened(let database, let contents):
                return Opened(
                    database: database, contents: contents,
                    condition: StoreCondition(storePath: path, health: .ok, source: .store))
            case .damaged(let reason):
                return recover(damage: reason, readable: true)
            case .unavailable(let reason):
                return readOnly(reason, readStore: true)
            }
        }
    }

    /// Opens a store file as it is: quick_check, tables, format, and a full read.
    ///
    /// The check runs on a read-only connection, which never writes to the file: closing the last writable
    /// connection checkpoints the `-wal` into the main file, and a damaged file is kept exactly as it was.
    ///
    /// The check and the read run side by side, each on a read-only connection of its own, and the read is
    /// used only if the check passes: on two cores a store's start then takes the longer of the two instead
    /// of both. A read that fails there (a store of an older format, which `prepare` completes) is made
    /// again after `prepare`.
    func attempt(_ file: String) -> Attempt {
        let early = Locked<StorePersistence.Contents?>(nil)
        do {
            let checker = try StorePersistence.openReadOnly(file)
            defer { try? checker.close() }
            let reading = DispatchGroup()
            // A queue of its own, which has a thread at once: this one waits for it.
            DispatchQueue(label: "settings-broker.store-read", qos: .userInitiated).async(group: reading) {
                if let contents = try? StorePersistence.readAlone(file) {
                    early.withLock { $0 = contents }
                }
            }
            // Also when the check throws: the file is not moved aside while the read still has it open.
            defer { reading.wait() }
            let check = try checker.use { db in try db.strings("PRAGMA quick_check") }
            guard check == ["ok"] else {
                return .damaged("\(file) failed its integrity check: \(check.prefix(3).joined(separator: "; "))")
            }
        } catch {
            return classify(error, file)
        }
        let database: SQLiteDatabase
        do {
            StoreFiles.preallocate(file + "-wal", bytes: StorePersistence.logBytes, like: file)
            database = try StorePersistence.openWritable(file, durability: durability)
        } catch {
            return classify(error, file)
        }
        do {
            try database.transaction { db in try StorePersistence.prepare(db, path: file) }
            // `prepare` adds only what an older format lacks (empty tables, the format's number): what the
            // read found is what the store holds.
            let contents = try early.withLock { $0.take() } ?? database.use { db in try StorePersistence.read(db) }
            StorePersistence.makeIncremental(database)
            return .opened(database, contents)
        } catch {
            try? database.close()
            return classify(error, file)
        }
    }

    private func classify(_ error: any Error, _ file: String) -> Attempt {
        if let error = error as? SQLiteError, error.isDamage {
            return .damaged("\(file) is damaged: \(Self.describe(error))")
        }
        if let error = error as? SettingsError { return .unavailable(error.message) }
        return .unavailable("cannot open \(file): \(Self.describe(error))")
    }

    /// Moves a damaged store aside, then restores the backup or starts empty.
    private func recover(damage: String, readable: Bool) -> Opened {
        // Best effort: the damaged file may still say how far its serial had gone.
        let floor = readable ? (Self.readCopy(of: path) { db in try StorePersistence.serial(db) } ?? 0) : 0
        let aside: String
        do {
            aside = try StoreFiles.moveAside(path, label: "damaged")
        } catch {
            return readOnly("\(damage); it could not be moved aside (\(Self.describe(error))), so it is left as it is", readStore: false)
        }
        var opened = createOrRestore(damage: "\(damage); it was moved to \(aside)", serialFloor: floor)
        opened.condition.damagedFile = aside
        return opened
    }

    /// Restores the backup into place when there is a good one, else creates an empty store.
    ///
    /// - Parameters:
    ///   - damage: why the store is being replaced; nil when it is simply missing.
    ///   - serialFloor: the serial the new store starts from at least.
    private func createOrRestore(damage: String?, serialFloor: UInt64) -> Opened {
        let reason = damage ?? "\(path) was missing"
        var damagedBackup: String?
        var backupProblem = ""
        if StoreFiles.exists(backupPath) {
            switch Self.checkBackup(backupPath) {
            case .success(let contents):
                do {
                    try restoreBackup(serialFloor: max(serialFloor, contents.serial))
                } catch {
                    return readOnly("\(reason); restoring the backup \(backupPath) failed: \(Self.describe(error))", readStore: false)
                }
                return finish(
                    attempt(path), health: .recoveredFromBackup,
                    problem: "\(reason); the store was restored from the backup \(backupPath) (serial \(contents.serial))",
                    source: .backup)
            case .failure(let problem):
                damagedBackup = try? StoreFiles.moveAside(backupPath, label: "damaged")
                backupProblem = "; the backup is damaged too (\(problem))"
                    + (damagedBackup.map { " and was moved to \($0)" } ?? "")
            }
        }
        do {
            try createEmpty(serialFloor: serialFloor)
        } catch {
            return readOnly("\(damage.map { "\($0); " } ?? "")cannot create the store: \(Self.describe(error))", readStore: false)
        }
        var opened = finish(
            attempt(path), health: damage == nil && damagedBackup == nil ? .ok : .recoveredEmpty,
            problem: damage == nil && damagedBackup == nil ? nil : "\(reason)\(backupProblem); the store starts empty",
            source: .empty)
        opened.condition.damagedBackup = damagedBackup
        return opened
    }

    private func finish(_ attempt: Attempt, health: StoreHealth, problem: String?, source: StoreCondition.Source) -> Opened {
        switch attempt {
        case .opened(let database, let contents):
            return Opened(
                database: database, contents: contents,
                condition: StoreCondition(storePath: path, health: health, problem: problem, source: source))
        case .damaged(let reason), .unavailable(let reason):
            return readOnly("\(problem.map { "\($0); " } ?? "")then it did not open: \(reason)", readStore: false)
        }
    }

    /// Serves read-only: the store's values from a private copy, else the backup's, else none.
    private func readOnly(_ problem: String, readStore: Bool) -> Opened {
        func opened(_ contents: StorePersistence.Contents, _ source: StoreCondition.Source, _ note: String) -> Opened {
            Opened(
                database: nil, contents: contents,
                condition: StoreCondition(storePath: path, health: .readOnly, problem: problem + note, source: source))
        }
        if readStore, let contents = Self.readCopy(of: path, { db in try StorePersistence.read(db) }) {
            return opened(contents, .store, "; serving the store's values read-only")
        }
        if StoreFiles.exists(backupPath), case .success(let contents) = Self.checkBackup(backupPath) {
            return opened(contents, .backup, "; serving the values of the backup \(backupPath) read-only")
        }
        return opened(StorePersistence.Contents(), .empty, "; serving no values, read-only")
    }

    // MARK: - Files

    /// Builds an empty store under a temporary name and renames it into place.
    private func createEmpty(serialFloor: UInt64) throws {
        try clearCompanions()
        let building = path + ".creating"
        StoreFiles.removeIfPresent(building)
        StoreFiles.removeIfPresent(building + "-journal")
        let database = try SQLiteDatabase(path: building)
        do {
            // Before the first table: the file gives its free pages back (``StorePersistence/returnFreePages(_:)``).
            try database.use { db in try db.execute("PRAGMA auto_vacuum = INCREMENTAL") }
            try database.transaction { db in
                try StorePersistence.prepare(db, path: path)
                try db.execute(
                    "UPDATE meta SET value = ? WHERE name = 'serial'", [.integer(Int64(bitPattern: serialFloor))])
            }
            try database.close()
            try StoreFiles.sync(building)
            try StoreFiles.rename(building, to: path)
        } catch {
            try? database.close()
            StoreFiles.removeIfPresent(building)
            throw error
        }
        StoreFiles.syncDirectory(of: path)
    }

    /// Copies the backup into place, with its serial raised to `serialFloor`.
    private func restoreBackup(serialFloor: UInt64) throws {
        try clearCompanions()
        let restoring = path + ".restoring"
        StoreFiles.removeIfPresent(restoring + "-journal")
        try StoreFiles.copy(backupPath, to: restoring)
        do {
            let database = try SQLiteDatabase(path: restoring)
            try database.transaction { db in
                try db.execute(
                    "UPDATE meta SET value = max(value, ?) WHERE name = 'serial'", [.integer(Int64(bitPattern: serialFloor))])
            }
            try database.close()
            try StoreFiles.sync(restoring)
            try StoreFiles.rename(restoring, to: path)
        } catch {
            StoreFiles.removeIfPresent(restoring)
            throw error
        }
        StoreFiles.syncDirectory(of: path)
    }

    /// Before a new file takes the store's name: a `-wal` left from a store that is gone would be replayed
    /// into it, so it is moved aside; a `-shm` is only an index and is removed.
    private func clearCompanions() throws {
        if StoreFiles.exists(path + "-wal") {
            try StoreFiles.rename(path + "-wal", to: "\(path).orphaned-\(StoreFiles.timestamp())-wal")
        }
        StoreFiles.removeIfPresent(path + "-shm")
    }

    /// What a check of a backup found.
    enum BackupCheck {
        case success(StorePersistence.Contents)
        case failure(String)
    }

    /// Checks a backup (quick_check) and reads it, through a read-only connection.
    static func checkBackup(_ file: String) -> BackupCheck {
        do {
            let database = try StorePersistence.openReadOnly(file)
            defer { try? database.close() }
            return try database.use { db in
                let check = try db.strings("PRAGMA quick_check")
                guard check == ["ok"] else {
                    return .failure("it failed its integrity check: \(check.prefix(3).joined(separator: "; "))")
                }
                return .success(try StorePersistence.read(db))
            }
        } catch {
            return .failure(describe(error))
        }
    }

    /// Runs `body` on a private copy of a store file and its `-wal`, so that reading needs no write access
    /// to the store's directory and never changes the original; nil if anything fails.
    static func readCopy<T>(of file: String, _ body: (SQLiteConnection) throws -> T) -> T? {
        guard let directory = try? StoreFiles.makeTemporaryDirectory() else { return nil }
        let copy = directory + "/store.db"
        defer {
            for suffix in ["", "-wal", "-shm", "-journal"] { StoreFiles.removeIfPresent(copy + suffix) }
            StoreFiles.removeDirectory(directory)
        }
        do {
            try StoreFiles.copy(file, to: copy, sync: false)
            if StoreFiles.exists(file + "-wal") {
                try StoreFiles.copy(file + "-wal", to: copy + "-wal", sync: false)
            }
            let database = try SQLiteDatabase(path: copy)
            defer { try? database.close() }
            return try database.use(body)
        } catch {
            return nil
        }
    }

    /// The first ancestor of `directory` (or itself) that exists but is not a directory, as a sentence.
    static func obstacle(to directory: String) -> String? {
        var current = directory
        while current != "/" && !current.isEmpty {
            if case .file = StoreFiles.kind(of: current) { return "\(current) is a file, not a directory" }
            current = StoreFiles.directory(of: current)
        }
        return nil
    }

    /// An error as a short text: SQLite's message and code for a database error.
    static func describe(_ error: any Error) -> String {
        if let error = error as? SQLiteError { return error.description }
        if let error = error as? SettingsError { return error.message }
        if let error = error as? StoreFiles.Failure { return error.description }
        return "\(error)"
    }
}
