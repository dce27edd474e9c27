// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import SyncProtocol

// The store's side of sync across machines (docs/sync.md; decision 0028): three tables
// beside the values, written in the same transaction as the commit they belong to, so that an acknowledged
// write is in the queue exactly when it is in the store.
//
// - `sync_outbox(path, type, value, clock, machine)`: the changes queued for the database, one per key (a newer
//   write of a key replaces the queued one); `type` and `value` are NULL for a reset.
// - `sync_versions(path, clock, machine)`: the version of each synced key's last change, local or remote.
// - `sync_state(name, value)`: `cursor` (the database revision pulled up to) and the like.
//
// The tables and the schemas' `machine_local` column are added to a store of any format when it is opened for
// writing; a broker that does not know them leaves them alone, so the store's format stays 2.
extension StorePersistence {
    /// Creates the sync tables and the `machine_local` column when they are missing. In `prepare`'s
    /// transaction.
    static func prepareSync(_ db: SQLiteConnection) throws {
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS sync_outbox (
                path TEXT PRIMARY KEY NOT NULL, type TEXT, value TEXT, clock INTEGER NOT NULL,
                machine TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS sync_versions (
                path TEXT PRIMARY KEY NOT NULL, clock INTEGER NOT NULL, machine TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS sync_state (name TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS sync_outbox_order ON sync_outbox (clock, path);
            """)
        if try !hasMachineLocalColumn(db) {
            try db.execute("ALTER TABLE schemas ADD COLUMN machine_local INTEGER NOT NULL DEFAULT 0")
        }
    }

    private static func hasMachineLocalColumn(_ db: SQLiteConnection) throws -> Bool {
        (try db.integer("SELECT COUNT(*) FROM pragma_table_info('schemas') WHERE name = 'machine_local'") ?? 0) > 0
    }

    /// Marks the machine-local schemas of what `read` read (a store without the column has none).
    static func readMachineLocal(_ db: SQLiteConnection, into contents: inout Contents) throws {
        guard try hasMachineLocalColumn(db) else { return }
        try db.rows("SELECT path FROM schemas WHERE machine_local != 0") { row throws(SQLiteError) in
            if let key = try? SettingPath(row.text(0)) { contents.schemas[key]?.isMachineLocal = true }
        }
    }

    /// Records a schema's `machine_local` flag after `insert` wrote its row (which leaves it 0).
    static func recordMachineLocal(_ schema: SettingSchema, at path: String, _ db: SQLiteConnection) throws {
        guard schema.isMachineLocal else { return }
        try db.execute("UPDATE schemas SET machine_local = 1 WHERE path = ?", [.text(path)])
    }

    /// Writes what a batch queues and records for sync. In the commit's transaction.
    static func write(_ record: SyncRecord, _ db: SQLiteConnection) throws {
        for key in record.unqueued {
            try db.execute("DELETE FROM sync_outbox WHERE path = ?", [.text(key.rawValue)])
        }
        for change in record.queued {
            try queue(change, db)
        }
        for (key, version) in record.versions {
            try recordVersion(version, of: key, db)
        }
        // A key made secret whose value may be in the database: a reset replaces it there.
        for tombstone in record.tombstones {
            let known = try db.integer("SELECT COUNT(*) FROM sync_versions WHERE path = ?", [.text(tombstone.key.rawValue)])
            guard (known ?? 0) > 0 else { continue }
            try queue(tombstone, db)
            try recordVersion(tombstone.version, of: tombstone.key, db)
        }
        if let cursor = record.cursor {
            try setSyncState("cursor", .integer(cursor), db)
        }
    }

    /// Queues a change for the database, replacing the key's queued one.
    private static func queue(_ change: SyncChange, _ db: SQLiteConnection) throws {
        try db.execute(
            """
            INSERT INTO sync_outbox (path, type, value, clock, machine) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET type = excluded.type, value = excluded.value,
                clock = excluded.clock, machine = excluded.machine
            """,
            [
                .text(change.key.rawValue), .nullable(change.value?.type.signatureText),
                .nullable(change.value.map { GVariantText.format($0) }),
                .integer(Int64(bitPattern: change.version.clock)), .text(change.version.machine),
            ])
    }

    /// Records the version of a key's last change.
    private static func recordVersion(_ version: SyncVersion, of key: SettingPath, _ db: SQLiteConnection) throws {
        try db.execute(
            """
            INSERT INTO sync_versions (path, clock, machine) VALUES (?, ?, ?)
            ON CONFLICT(path) DO UPDATE SET clock = excluded.clock, machine = excluded.machine
            """,
            [.text(key.rawValue), .integer(Int64(bitPattern: version.clock)), .text(version.machine)])
    }

    static func setSyncState(_ name: String, _ value: SQLiteArgument, _ db: SQLiteConnection) throws {
        try db.execute(
            "INSERT INTO sync_state (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value",
            [.text(name), value])
    }

    /// Reads a change of the outbox, as ``queuedRows(after:limit:)`` copied it.
    static func change(from row: QueuedRow) throws -> SyncChange {
        let key = try SettingPath(row.path)
        var value: DBusValue?
        if let typeText = row.type, let text = row.value {
            value = try GVariantText.parse(text, as: try DBusType(parsing: typeText))
        }
        return SyncChange(key: key, value: value, version: SyncVersion(clock: UInt64(bitPattern: row.clock), machine: row.machine))
    }

    /// Runs `body` on the store's connection, off the tasks' threads; fails when the store is read-only.
    func performSync<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        guard let database else { throw readOnlyFailure }
        return try await database.perform(body)
    }

    /// ``performSync(_:)`` with the writes of `body` not fsynced on their own, also in full durability: for
    /// what sync can make again, like the remote changes of ``commit(_:sync:waitingForLocks:)``. A write the
    /// machine loses to a power cut is made again: the cursor, lost, pulls the same rows again; an
    /// acknowledgement, lost, leaves its changes queued, pushed again with their own versions, which the
    /// database keeps or clamps as before. The next durable commit's fsync takes these writes to disk too (the
    /// log is written in order).
    func performUnsynced<T: Sendable>(_ body: @escaping @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        guard let database else { throw readOnlyFailure }
        guard durability == .full else { return try await database.perform(body) }
        return try await database.perform { db in
            try db.execute("PRAGMA synchronous = NORMAL")
            defer { try? db.execute("PRAGMA synchronous = FULL") }
            return try body(db)
        }
    }

    /// Queued changes after `position` in the queue's order (clock, then path), at most `limit`, as the store
    /// holds them (their values still text, read by ``change(from:)`` outside the connection's lock): one
    /// short use of the connection, through the index on (clock, path), so that a commit waits for `limit`
    /// rows at most.
    func queuedRows(after position: QueuedRow.Position?, limit: Int) async throws -> [QueuedRow] {
        try await performSync { db in
            var rows: [QueuedRow] = []
            func read(_ row: SQLiteRow) {
                rows.append(
                    QueuedRow(
                        path: row.text(0), type: row.optionalText(1), value: row.optionalText(2), clock: row.integer(3),
                        machine: row.text(4)))
            }
            if let position {
                try db.rows(
                    """
                    SELECT path, type, value, clock, machine FROM sync_outbox WHERE (clock, path) > (?, ?)
                    ORDER BY clock, path LIMIT ?
                    """, [.integer(position.clock), .text(position.path), .integer(Int64(limit))]
                ) { row throws(SQLiteError) in read(row) }
            } else {
                try db.rows(
                    "SELECT path, type, value, clock, machine FROM sync_outbox ORDER BY clock, path LIMIT ?",
                    [.integer(Int64(limit))]
                ) { row throws(SQLiteError) in read(row) }
            }
            return rows
        }
    }

    /// Removes queued rows that cannot be read (they were written by this code, so only a damaged row is
    /// unreadable), unless a newer write of their key replaced them.
    func dropQueued(_ rows: [QueuedRow]) async throws {
        guard !rows.isEmpty else { return }
        try await performSync { db in
            for row in rows {
                try db.execute(
                    "DELETE FROM sync_outbox WHERE path = ? AND clock = ? AND machine = ?",
                    [.text(row.path), .integer(row.clock), .text(row.machine)])
            }
        }
    }

    /// The number of queued changes.
    func queuedCount() async throws -> Int {
        try await performSync { db in Int(try db.integer("SELECT COUNT(*) FROM sync_outbox") ?? 0) }
    }

    /// Removes pushed changes from the queue, unless a newer write of the key replaced them meanwhile, and sets
    /// the cursor to `cursor` when given.
    func acknowledge(_ pushed: [SyncChange], as versions: [SyncVersion], cursor: Int64?) async throws {
        try await performUnsynced { db in
            try db.execute("BEGIN IMMEDIATE")
            do {
                for (change, version) in zip(pushed, versions) {
                    let old: [SQLiteArgument] = [
                        .text(change.key.rawValue), .integer(Int64(bitPattern: change.version.clock)),
                        .text(change.version.machine),
                    ]
                    try db.execute("DELETE FROM sync_outbox WHERE path = ? AND clock = ? AND machine = ?", old)
                    if version != change.version {
                        try db.execute(
                            "UPDATE sync_versions SET clock = ? WHERE path = ? AND clock = ? AND machine = ?",
                            [.integer(Int64(bitPattern: version.clock))] + old)
                    }
                }
                if let cursor { try StorePersistence.setSyncState("cursor", .integer(cursor), db) }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Queues changes unless their key has a queued change or a recorded version (``DurableStore/queueForSync(_:)``).
    func queue(_ changes: [SyncChange]) async throws {
        try await performSync { db in
            try db.execute("BEGIN IMMEDIATE")
            do {
                for change in changes {
                    let recorded = try db.integer(
                        "SELECT COUNT(*) FROM sync_versions WHERE path = ?", [.text(change.key.rawValue)]) ?? 0
                    guard recorded == 0 else { continue }
                    try db.execute(
                        """
                        INSERT INTO sync_outbox (path, type, value, clock, machine) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT(path) DO NOTHING
                        """,
                        [
                            .text(change.key.rawValue), .nullable(change.value?.type.signatureText),
                            .nullable(change.value.map { GVariantText.format($0) }),
                            .integer(Int64(bitPattern: change.version.clock)), .text(change.version.machine),
                        ])
                    try db.execute(
                        "INSERT INTO sync_versions (path, clock, machine) VALUES (?, ?, ?) ON CONFLICT(path) DO NOTHING",
                        [.text(change.key.rawValue), .integer(Int64(bitPattern: change.version.clock)),
                         .text(change.version.machine)])
                }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// The recorded versions of keys (those without one are left out).
    func versions(of keys: [SettingPath]) async throws -> [SettingPath: SyncVersion] {
        try await performSync { db in
            var versions: [SettingPath: SyncVersion] = [:]
            for key in keys {
                try db.rows("SELECT clock, machine FROM sync_versions WHERE path = ?", [.text(key.rawValue)]) {
                    row throws(SQLiteError) in
                    versions[key] = SyncVersion(clock: UInt64(bitPattern: row.integer(0)), machine: row.text(1))
                }
            }
            return versions
        }
    }

    /// A value of `sync_state` as an integer, nil when unset.
    func syncStateInteger(_ name: String) async throws -> Int64? {
        try await performSync { db in
            try db.integer("SELECT value FROM sync_state WHERE name = ?", [.text(name)])
        }
    }

    /// Sets a value of `sync_state`; `unsynced`, the write is not fsynced on its own (``performUnsynced(_:)``).
    func setSyncStateInteger(_ name: String, _ value: Int64, unsynced: Bool = false) async throws {
        let body: @Sendable (SQLiteConnection) throws -> Void = { db in
            try StorePersistence.setSyncState(name, .integer(value), db)
        }
        if unsynced { try await performUnsynced(body) } else { try await performSync(body) }
    }

    /// The largest clock recorded in `sync_versions`, so that a restarted broker's clock never goes back.
    func largestRecordedClock() async throws -> UInt64 {
        try await performSync { db in UInt64(bitPattern: try db.integer("SELECT MAX(clock) FROM sync_versions") ?? 0) }
    }

    /// Copies the store to `target` (checked, synced, renamed into place) unless `target` exists.
    func copy(to target: String) async throws {
        guard !StoreFiles.exists(target) else { return }
        let source = try StorePersistence.openReadOnly(path)
        defer { try? source.close() }
        let temporary = target + ".tmp"
        try await source.perform { db in
            StoreFiles.removeIfPresent(temporary)
            StoreFiles.removeIfPresent(temporary + "-journal")
            do {
                let destination = try SQLiteDatabase(path: temporary)
                defer { try? destination.close() }
                try destination.use { copy in
                    try db.backup(to: copy)
                    try copy.execute("PRAGMA journal_mode = DELETE")
                    let check = try copy.strings("PRAGMA quick_check")
                    guard check == ["ok"] else {
                        throw StoreFiles.Failure("the copy failed its integrity check: \(check.prefix(3).joined(separator: "; "))")
                    }
                }
                try destination.close()
                try StoreFiles.sync(temporary)
                try StoreFiles.rename(temporary, to: target)
                StoreFiles.syncDirectory(of: target)
            } catch {
                StoreFiles.removeIfPresent(temporary)
                throw error
            }
        }
    }
}

/// A queued change as the store holds it, its value still GVariant text.
struct QueuedRow: Sendable {
    /// A place in the queue's order: after the row of this clock and path.
    typealias Position = (clock: Int64, path: String)

    let path: String
    let type: String?
    let value: String?
    let clock: Int64
    let machine: String

    /// The row's place in the queue's order.
    var position: Position { (clock, path) }
    /// The bytes of text copied out of the store for it.
    var textBytes: Int { path.utf8.count + (type?.utf8.count ?? 0) + (value?.utf8.count ?? 0) + machine.utf8.count }
}
