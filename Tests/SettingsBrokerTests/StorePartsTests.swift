// SPDX-License-Identifier: Apache-2.0

import DBus
@testable import SettingsBroker
import SettingsModel
import Testing

/// The broker's in-memory table of values, its SQLite layer and its path helpers, on their own.
struct StorePartsTests {
    static func key(_ text: String) throws -> SettingPath { try SettingPath(text) }

    @Test func theValueTableKeepsEveryOtherEntryWhenOneIsRemovedFromTheMiddle() throws {
        var table = ValueTable()
        let values: [DBusValue] = [
            .string("short"), .string(String(repeating: "long text ", count: 8)), .int32(-7), .uint32(7),
            .int64(.min), .uint64(.max), .double(0.5), .boolean(true), .byte(3),
            .array(.string, [.string("a"), .string("b")]), .variant(.int16(2)),
        ]
        for (index, value) in values.enumerated() {
            table[try Self.key("/t/k\(index)")] = ValueTable.UserValue(value: value, serial: UInt64(index + 1))
        }
        #expect(table.count == values.count)

        // When: a key in the middle is removed (the last entry moves into its place), then one is replaced.
        table[try Self.key("/t/k3")] = nil
        table[try Self.key("/t/k0")] = ValueTable.UserValue(value: .string("new"), serial: 99)

        // Then: every other key keeps its value, type and serial.
        #expect(table.count == values.count - 1)
        #expect(table[try Self.key("/t/k3")] == nil)
        for (index, value) in values.enumerated() where index != 3 && index != 0 {
            let entry = try #require(table[try Self.key("/t/k\(index)")])
            #expect(entry.value == value)
            #expect(entry.type == value.type)
            #expect(entry.serial == UInt64(index + 1))
        }
        #expect(table[try Self.key("/t/k0")]?.value == .string("new"))
        #expect(Set(table.keys.map(\.rawValue)).count == values.count - 1)
        #expect(table.first { _, user in user.serial == 99 }?.key == (try Self.key("/t/k0")))
        // Removing a key that is not there changes nothing.
        table[try Self.key("/t/none")] = nil
        #expect(table.count == values.count - 1)
    }

    @Test(arguments: [
        "", "a", String(repeating: "x", count: 15), String(repeating: "x", count: 16), "value of key 99999",
        String(repeating: "y", count: 22), String(repeating: "z", count: 23), "été à l'ombre 🌳", "🌳🌳🌳🌳🌳🌳",
        String(repeating: "é", count: 11), String(repeating: "é", count: 11) + "e", "nul\u{0}inside",
    ])
    func textIsKeptWhateverItsLength(text: String) {
        let stored = StoredValue(.string(text))
        #expect(stored.value == .string(text))
        #expect(stored.type == .string)
        if case .shortString = stored {
            #expect(text.utf8.count <= InlineText.capacity)
        } else {
            #expect(text.utf8.count > InlineText.capacity)
        }
        #expect(MemoryLayout<StoredValue>.size <= 24)
        #expect(MemoryLayout<ValueTable.UserValue>.stride <= 32)
    }

    /// A value's text as a store holds it (bytes, which need not be UTF-8) reads as the parser reads the same
    /// bytes made a `String`, whether it takes the short way (plain short text straight into place) or not.
    @Test(arguments: [
        ("s", Array("'value of key 99999'".utf8)), ("s", Array("''".utf8)),
        ("s", Array("'\(String(repeating: "y", count: 22))'".utf8)),
        ("s", Array("'\(String(repeating: "z", count: 23))'".utf8)), ("s", Array("'été'".utf8)),
        ("s", [0x27, 0x61, 0xE2, 0x82, 0x27]), ("s", [0x27, 0xFF, 0xFE, 0x27]), ("s", [0x27, 0x61, 0x00, 0x62, 0x27]),
        ("s", Array("'it\\'s'".utf8)), ("s", Array("\"double\"".utf8)), ("s", Array(" 'spaced'".utf8)),
        ("s", Array("'".utf8)), ("s", Array("@s 'x'".utf8)), ("s", Array("5".utf8)),
        ("b", Array("true".utf8)), ("b", Array("false".utf8)), ("b", Array("yes".utf8)),
        ("i", Array("-2147483648".utf8)), ("i", Array("2147483648".utf8)), ("i", Array("007".utf8)),
        ("u", Array("7".utf8)), ("d", Array("0.5".utf8)), ("as", Array("['a', 'b']".utf8)), ("i", Array("'x'".utf8)),
    ] as [(String, [UInt8])])
    func aStoredValuesTextReadsAsTheParserReadsIt(type: String, text: [UInt8]) throws {
        let type = try DBusType(parsing: type)
        let parsed = Result { () throws(GVariantTextError) in
            try GVariantText.parse(String(decoding: text, as: UTF8.self), as: type)
        }
        let stored = text.withUnsafeBufferPointer { bytes in
            Result { () throws(GVariantTextError) in try StoredValue(storedText: bytes, as: type) }
        }
        switch (parsed, stored) {
        case (.success(let value), .success(let stored)):
            #expect(stored.value == value)
            #expect(stored.type == value.type)
        case (.failure(let error), .failure(let storedError)):
            #expect(storedError.message == error.message)
        default:
            Issue.record("the parser read \(text) as \(parsed), the store's reading as \(stored)")
        }
    }

    /// A row of a store's `settings` table, as a file holds it.
    typealias StoredRow = (path: String, type: String, value: String, serial: Int64)

    /// Reads a store file whose `settings` table orders its paths by `collation` and holds `rows`, as the broker
    /// reads a store at start-up.
    static func readStore(collation: String, rows: [StoredRow]) throws -> StorePersistence.Contents {
        let directory = try StoreFiles.makeTemporaryDirectory()
        let file = directory + "/t.db"
        defer {
            for suffix in ["", "-wal", "-shm"] { StoreFiles.removeIfPresent(file + suffix) }
            StoreFiles.removeDirectory(directory)
        }
        let database = try SQLiteDatabase(path: file)
        defer { try? database.close() }
        try database.transaction { db in
            try db.execute(
                """
                CREATE TABLE settings (
                    path TEXT COLLATE \(collation) PRIMARY KEY NOT NULL, type TEXT NOT NULL, value TEXT NOT NULL,
                    serial INTEGER NOT NULL) WITHOUT ROWID
                """)
            try StorePersistence.prepare(db, path: file)
            for row in rows {
                try db.execute(
                    "INSERT INTO settings (path, type, value, serial) VALUES (?, ?, ?, ?)",
                    [.text(row.path), .text(row.type), .text(row.value), .integer(row.serial)])
            }
        }
        return try database.use { db in try StorePersistence.read(db) }
    }

    /// A store's values are read in the order of their paths and built into the table in one pass; a file whose
    /// paths SQLite orders otherwise (here a column declared case-blind) is read whole all the same.
    @Test(arguments: ["BINARY", "NOCASE"])
    func aStoreIsReadWholeWhateverOrderItsRowsComeIn(collation: String) throws {
        let rows: [StoredRow] = [
            ("/a/b", "s", "'lower b'", 4), ("/a/C", "s", "'upper C'", 9), ("/a/a", "s", "'lower a'", 2),
            ("/a/D", "s", "'upper D'", 7), ("/z", "s", "'last'", 1), ("/a/bad//key", "s", "'refused'", 3),
        ]

        let contents = try Self.readStore(collation: collation, rows: rows)

        #expect(contents.values.count == 5)
        for row in rows where row.path != "/a/bad//key" {
            let entry = try #require(contents.values[try Self.key(row.path)])
            #expect(entry.value == (try GVariantText.parse(row.value, as: .string)))
            #expect(entry.serial == UInt64(row.serial))
        }
        #expect(Array(contents.values.order) == ["/a/C", "/a/D", "/a/a", "/a/b", "/z"])
        #expect(contents.values.order.checkInvariants() == nil)
        #expect(contents.unreadable.map(\.path) == ["/a/bad//key"])
        #expect(contents.serial == 9)
    }

    /// A large store is read by two threads, one stepping SQLite and one making the values (``RawRows``): every
    /// value, the keys' order, each row that cannot be read and the serial come out as one thread reads them,
    /// across the boundaries of the parts handed between the threads, whatever order the rows come in.
    @Test(arguments: ["BINARY", "NOCASE"])
    func aLargeStoreIsReadWholeByTwoThreads(collation: String) throws {
        // More rows than one thread reads, ending in a part that is not full; upper and lower case alternate, so
        // that a case-blind column gives the rows in another order than their bytes'.
        let count = RawRows.pipelineThreshold + RawRows.partRows + 17
        var rows: [StoredRow] = (0..<count).map { index in
            ("/big/\(index % 2 == 0 ? "K" : "k")\(index)", "s", "'value \(index)'", Int64(index + 1))
        }
        // Rows that cannot be read: a bad path at a part's boundary, a value of the wrong type, an unknown type.
        rows[RawRows.partRows - 1].path = "/big//bad"
        rows[RawRows.partRows].value = "'unterminated"
        rows[count - 1].type = "not a type"
        let unreadable = Set([rows[RawRows.partRows - 1].path, rows[RawRows.partRows].path, rows[count - 1].path])

        let contents = try Self.readStore(collation: collation, rows: rows)

        #expect(contents.values.count == count - unreadable.count)
        for (index, row) in rows.enumerated() where !unreadable.contains(row.path) {
            let entry = try #require(contents.values[try Self.key(row.path)])
            #expect(entry.value == .string("value \(index)"))
            #expect(entry.serial == UInt64(row.serial))
        }
        let readable = rows.map(\.path).filter { !unreadable.contains($0) }
        #expect(Array(contents.values.order) == readable.sorted { Array($0.utf8).lexicographicallyPrecedes($1.utf8) })
        #expect(contents.values.order.checkInvariants() == nil)
        #expect(Set(contents.unreadable.map(\.path)) == unreadable)
        #expect(contents.unreadable.count == unreadable.count)
        #expect(contents.serial == UInt64(count))
    }

    @Test func sqliteErrorsCarryTheirCodeAndARollbackUndoesTheTransaction() throws {
        let directory = try StoreFiles.makeTemporaryDirectory()
        let file = directory + "/t.db"
        defer {
            for suffix in ["", "-journal"] { StoreFiles.removeIfPresent(file + suffix) }
            StoreFiles.removeDirectory(directory)
        }
        let database = try SQLiteDatabase(path: file)
        try database.use { db in try db.execute("CREATE TABLE t (k TEXT PRIMARY KEY NOT NULL, v)") }

        // When: a transaction fails half-way (a duplicate key).
        #expect(throws: SQLiteError.self) {
            try database.transaction { db in
                try db.execute("INSERT INTO t VALUES (?, ?)", [.text("a"), .integer(1)])
                try db.execute("INSERT INTO t VALUES (?, ?)", [.text("a"), .integer(2)])
            }
        }
        // Then: nothing of it is stored, and the error names SQLite's constraint code.
        #expect(try database.use { db in try db.integer("SELECT COUNT(*) FROM t") } == 0)
        do {
            try database.use { db in
                try db.execute("INSERT INTO t VALUES (?, ?)", [.text("b"), .null])
                try db.execute("INSERT INTO t VALUES (?, ?)", [.text("b"), .null])
            }
            Issue.record("a duplicate key was accepted")
        } catch let error as SQLiteError {
            #expect(error.primaryCode == 19)  // SQLITE_CONSTRAINT
            #expect(error.description.contains("UNIQUE constraint failed"))
            #expect(!error.isDamage)
        }
        #expect(try database.use { db in try db.text("SELECT v FROM t WHERE k = 'b'") } == nil)
        try database.close()
        #expect(throws: SQLiteError.self) { try database.use { db in try db.integer("SELECT 1") } }
    }

    @Test(arguments: [
        ("/a/b/c", "/a/b"), ("/a", "/"), ("/", "/"), ("name", "."), ("/a/b/", "/a"), ("a/b", "a"),
    ])
    func theDirectoryOfAPath(path: String, directory: String) {
        #expect(StoreFiles.directory(of: path) == directory)
    }
}
