// SPDX-License-Identifier: Apache-2.0

// Design note: the store talks to SQLite through this file alone.
//
// The broker needs little of SQLite: open a file, run a few statements (some cached), read rows, run a
// transaction, copy a database with the backup API, and report errors with SQLite's own codes. A thin layer
// over the C API does that with no Foundation, which keeps the broker's memory small: the Swift
// Foundation libraries and ICU alone are about 6 MiB of resident pages.
//
// One connection is used by one thread at a time: every use goes through `use`, `transaction` or `perform`,
// which hold the connection's lock for the whole call, so a transaction never interleaves with another use.
// `perform` runs on a dispatch queue and resumes the task afterwards: no Swift task waits on the disk.

import CSQLite
import DBus
import Dispatch

/// An error SQLite reported: its extended result code and its message.
struct SQLiteError: Error, CustomStringConvertible, Equatable {
    /// The extended result code (`SQLITE_FULL`, `SQLITE_IOERR_FSYNC`, …).
    var code: Int32
    /// SQLite's message, or a description of the failed step.
    var message: String

    /// The primary result code (`SQLITE_IOERR` for `SQLITE_IOERR_FSYNC`).
    var primaryCode: Int32 { code & 0xff }

    /// Whether the error says the file is not a usable database: damaged, or not SQLite at all.
    var isDamage: Bool { [SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_FORMAT].contains(primaryCode) }

    var description: String { "\(message) (SQLite error \(code))" }

    init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    /// The error a connection reports after a failed call that returned `code`.
    init(_ code: Int32, _ handle: OpaquePointer?) {
        let extended = handle.map { sqlite3_extended_errcode($0) } ?? code
        var text = String(cString: sqlite3_errstr(code))
        if let handle, let message = sqlite3_errmsg(handle) { text = String(cString: message) }
        // After some failures (a backup step, a closed handle) the connection's last message is stale.
        if text == "not an error" { text = String(cString: sqlite3_errstr(code)) }
        self.init(code: extended == 0 ? code : extended, message: text)
    }
}

/// A value bound to a statement's parameter.
enum SQLiteArgument: Sendable {
    case integer(Int64)
    case text(String)
    case null

    /// Text, or NULL for nil.
    static func nullable(_ text: String?) -> SQLiteArgument { text.map { .text($0) } ?? .null }
}

/// One SQLite connection (see the design note above).
final class SQLiteDatabase: @unchecked Sendable {
    // @unchecked Sendable: the connection (its handle and cached statements) is only touched inside
    // `connection.withLock` (through `use`, `transaction`, `perform` and `close`), so one thread at a time
    // uses it, and it never escapes the closures it is lent to. The lock is held for the whole use, waits on
    // the disk included: only commits, the backup and opening use a connection, never a Swift task (`perform`
    // moves the work to a dispatch queue). A small commit may run on a D-Bus connection's thread; it takes
    // SQLite's write lock without waiting (`transactionIfUnlocked`), and no other use of the store's
    // connection can run at the same time, because commits are one at a time.
    private let connection: Locked<SQLiteConnection?>
    /// The file, for messages.
    let path: String
    /// How long a statement waits for a lock another connection holds, in milliseconds.
    private let busyMilliseconds: Int32

    /// Where `perform` runs its work: off the Swift tasks' threads.
    private static let queue = DispatchQueue(label: "settings-store-sqlite")

    /// Opens (or, unless `readOnly`, creates) a database file.
    ///
    /// - Parameter busyTimeout: how long a statement waits for a lock another connection holds.
    init(path: String, readOnly: Bool = false, busyTimeout: Duration = .seconds(5)) throws(SQLiteError) {
        self.path = path
        let milliseconds = busyTimeout.components.seconds * 1000 + busyTimeout.components.attoseconds / 1_000_000_000_000_000
        busyMilliseconds = Int32(clamping: milliseconds)
        connection = Locked(try Self.open(path, readOnly: readOnly, busyMilliseconds: busyMilliseconds))
    }

    private static func open(_ path: String, readOnly: Bool, busyMilliseconds: Int32) throws(SQLiteError) -> SQLiteConnection {
        var handle: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let error = SQLiteError(code, handle)
            sqlite3_close_v2(handle)
            throw error
        }
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, busyMilliseconds)
        return SQLiteConnection(handle: handle)
    }

    /// Replaces the connection with a new one to the same path, in one use of the lock: `beforeClosing` runs
    /// with the old connection (to copy what it holds), the old one is closed, `afterClosing` runs (to put a
    /// file in place), then the file at ``path`` is opened read-write and `configure` runs with it. When `beforeClosing` throws, the old connection stays;
    /// when anything after it throws, the connection is left closed.
    func reopen(
        beforeClosing: (SQLiteConnection) throws -> Void, afterClosing: () throws -> Void,
        configure: (SQLiteConnection) throws -> Void
    ) throws {
        try connection.withLock { connection in
            guard let old = connection else {
                throw SQLiteError(code: SQLITE_MISUSE, message: "the connection to \(path) is closed")
            }
            try beforeClosing(old)
            connection = nil
            try old.close()
            try afterClosing()
            let fresh = try Self.open(path, readOnly: false, busyMilliseconds: busyMilliseconds)
            do {
                try configure(fresh)
            } catch {
                try? fresh.close()
                throw error
            }
            connection = fresh
        }
    }

    deinit {
        try? close()
    }

    /// Closes the connection (the last one to a file in WAL mode folds the log into it). Uses after this
    /// fail with `SQLITE_MISUSE`; closing again does nothing.
    func close() throws(SQLiteError) {
        try connection.withLock { (connection: inout SQLiteConnection?) throws(SQLiteError) in
            guard let open = connection else { return }
            connection = nil
            try open.close()
        }
    }

    /// Runs `body` with the connection, outside any transaction (each statement commits on its own).
    func use<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try connection.withLock { connection in
            guard let connection else {
                throw SQLiteError(code: SQLITE_MISUSE, message: "the connection to \(path) is closed")
            }
            return try body(connection)
        }
    }

    /// Runs `body` in one write transaction (`BEGIN IMMEDIATE`), committed when it returns and rolled back
    /// when it throws.
    func transaction<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try transaction(waitingForLocks: true, body)!
    }

    /// ``transaction(_:)`` that does not wait for the write lock when another connection holds it: it then
    /// returns nil at once, and nothing has run.
    func transactionIfUnlocked<T>(_ body: (SQLiteConnection) throws -> T) throws -> T? {
        try transaction(waitingForLocks: false, body)
    }

    private func transaction<T>(waitingForLocks: Bool, _ body: (SQLiteConnection) throws -> T) throws -> T? {
        try use { connection in
            if waitingForLocks {
                try connection.step("BEGIN IMMEDIATE")
            } else {
                sqlite3_busy_timeout(connection.handle, 0)
                defer { sqlite3_busy_timeout(connection.handle, busyMilliseconds) }
                do {
                    try connection.step("BEGIN IMMEDIATE")
                } catch let error as SQLiteError where error.primaryCode == SQLITE_BUSY {
                    return nil
                }
            }
            let result: T
            do {
                result = try body(connection)
                try connection.step("COMMIT")
            } catch {
                if sqlite3_get_autocommit(connection.handle) == 0 { try? connection.execute("ROLLBACK") }
                throw error
            }
            return result
        }
    }

    /// ``use(_:)`` on a dispatch queue, for a Swift task: the task waits without holding a thread.
    func perform<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        let result: Result<T, any Error> = await handOff { deliver in
            Self.queue.async {
                deliver(Result { try self.use(body) })
            }
        }
        return try result.get()
    }
}

/// The connection as `SQLiteDatabase` lends it to a closure: statements, rows, and the backup API.
///
/// It must not be kept after that closure returns.
final class SQLiteConnection {
    let handle: OpaquePointer
    /// Statements prepared once, by their SQL.
    private var statements: [String: OpaquePointer] = [:]

    fileprivate init(handle: OpaquePointer) {
        self.handle = handle
    }

    fileprivate func close() throws(SQLiteError) {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        let code = sqlite3_close_v2(handle)
        guard code == SQLITE_OK else { throw SQLiteError(code, nil) }
    }

    /// Runs SQL: with arguments, one statement (prepared once and cached); without, any number of
    /// statements separated by semicolons.
    func execute(_ sql: String, _ arguments: [SQLiteArgument] = []) throws(SQLiteError) {
        guard !arguments.isEmpty else {
            let code = sqlite3_exec(handle, sql, nil, nil, nil)
            guard code == SQLITE_OK else { throw SQLiteError(code, handle) }
            return
        }
        try rows(sql, arguments) { _ throws(SQLiteError) in }
    }

    /// Runs one statement that yields no rows, prepared once and cached.
    func step(_ sql: String) throws(SQLiteError) {
        try rows(sql) { _ throws(SQLiteError) in }
    }

    /// Runs one statement and calls `body` with each row it yields.
    func rows(
        _ sql: String, _ arguments: [SQLiteArgument] = [], _ body: (SQLiteRow) throws(SQLiteError) -> Void
    ) throws(SQLiteError) {
        let statement = try prepare(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, argument) in arguments.enumerated() {
            let position = Int32(index + 1)
            let code: Int32
            switch argument {
            case .integer(let value): code = sqlite3_bind_int64(statement, position, value)
            case .null: code = sqlite3_bind_null(statement, position)
            case .text(let text):
                code = sqlite3_bind_text(statement, position, text, Int32(text.utf8.count), SQLiteConnection.transient)
            }
            guard code == SQLITE_OK else { throw SQLiteError(code, handle) }
        }
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { throw SQLiteError(code, handle) }
            try body(SQLiteRow(statement: statement))
        }
    }

    /// The first column of every row, as text.
    func strings(_ sql: String) throws(SQLiteError) -> [String] {
        var result: [String] = []
        try rows(sql) { row throws(SQLiteError) in result.append(row.text(0)) }
        return result
    }

    /// The first column of the first row as an integer; nil when there is no row or it is NULL.
    func integer(_ sql: String, _ arguments: [SQLiteArgument] = []) throws(SQLiteError) -> Int64? {
        var result: Int64?
        var first = true
        try rows(sql, arguments) { row throws(SQLiteError) in
            if first, !row.isNull(0) { result = row.integer(0) }
            first = false
        }
        return result
    }

    /// The first column of the first row as text; nil when there is no row or it is NULL.
    func text(_ sql: String) throws(SQLiteError) -> String? {
        var result: String?
        var first = true
        try rows(sql) { row throws(SQLiteError) in
            if first { result = row.optionalText(0) }
            first = false
        }
        return result
    }

    /// Copies this whole database into `destination` with SQLite's online backup API, in one step.
    func backup(to destination: SQLiteConnection) throws(SQLiteError) {
        guard let backup = sqlite3_backup_init(destination.handle, "main", handle, "main") else {
            throw SQLiteError(sqlite3_errcode(destination.handle), destination.handle)
        }
        let step = sqlite3_backup_step(backup, -1)
        let finish = sqlite3_backup_finish(backup)
        guard step == SQLITE_DONE else { throw SQLiteError(step, nil) }
        guard finish == SQLITE_OK else { throw SQLiteError(finish, destination.handle) }
    }

    /// A prepared statement for `sql`, made once per connection.
    private func prepare(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw SQLiteError(code, handle) }
        statements[sql] = statement
        return statement
    }

    /// `SQLITE_TRANSIENT`: SQLite copies bound text before the call returns.
    fileprivate static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// A row of a statement being stepped; valid only inside the closure it is passed to.
struct SQLiteRow {
    let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    func integer(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    /// The column as text ("" for NULL).
    func text(_ column: Int32) -> String { optionalText(column) ?? "" }

    /// The column's text as SQLite holds it (empty for NULL), valid only inside `body`: no `String` is made.
    func withBytes<Result>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result {
        // The text first, then its length: SQLite's documented order.
        let bytes = sqlite3_column_text(statement, column)
        let count = bytes == nil ? 0 : Int(sqlite3_column_bytes(statement, column))
        return try body(UnsafeBufferPointer(start: bytes, count: count))
    }

    /// The column as text; nil for NULL.
    func optionalText(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(statement, column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }
}
