// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import GRDB
import SettingsModel

/// How hard a commit works to survive a crash.
public enum Durability: String, Sendable, CaseIterable {
    /// Every commit is fsynced before it is acknowledged: it survives a broker crash and a machine crash.
    case full
    /// Commits are written but not fsynced one by one: they survive a broker crash; a machine crash or power
    /// loss may lose the last moments of writes (never the store's consistency).
    case relaxed
}

/// The SQLite file that holds the settings, in WAL mode, written through GRDB.
///
/// Tables: `settings(path, type, value, serial)` with each value in GVariant text; `schemas(path, …)`;
/// `meta(name, value)` holding the commit `serial` and the `format` version. GRDB runs every statement on its
/// own serial queue, so awaiting a write never blocks a Swift task.
final class StorePersistence: Sendable {
    let path: String
    private let database: DatabaseQueue

    /// The layout version written in `meta`.
    static let formatVersion = 1

    /// Opens (creating if needed) the store at `path`.
    ///
    /// - Throws: ``SettingsError`` `StoreFailure` naming the file and SQLite's reason.
    init(path: String, durability: Durability) throws(SettingsError) {
        self.path = path
        var configuration = Configuration()
        configuration.journalMode = .wal
        configuration.label = "settings-store"
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(durability == .full ? "FULL" : "NORMAL")")
        }
        do {
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            database = try DatabaseQueue(path: path, configuration: configuration)
            try database.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
                        CREATE TABLE IF NOT EXISTS settings (
                            path TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL, value TEXT NOT NULL,
                            serial INTEGER NOT NULL) WITHOUT ROWID;
                        CREATE TABLE IF NOT EXISTS schemas (
                            path TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL, default_value TEXT NOT NULL,
                            summary TEXT, description TEXT, range_min TEXT, range_max TEXT, choices TEXT,
                            secret INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
                        INSERT OR IGNORE INTO meta (name, value) VALUES ('format', \(StorePersistence.formatVersion));
                        INSERT OR IGNORE INTO meta (name, value) VALUES ('serial', 0);
                        """)
                let format = try Int.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'format'") ?? 0
                guard format <= StorePersistence.formatVersion else {
                    throw SettingsError.storeFailure(
                        "\(path) has store format \(format); this broker reads format \(StorePersistence.formatVersion) "
                            + "and older: use a newer settings-broker")
                }
            }
        } catch let error as SettingsError {
            throw error
        } catch {
            throw .storeFailure("cannot open the settings store \(path): \(error)")
        }
    }

    /// Everything in the store, as read at start-up.
    struct Contents {
        var serial: UInt64 = 0
        var values: [String: (value: DBusValue, serial: UInt64)] = [:]
        var schemas: [String: SettingSchema] = [:]
        /// Rows that could not be read, kept untouched in the file, with the reason.
        var unreadable: [(path: String, reason: String)] = []
    }

    /// Reads the whole store.
    func load() async throws(SettingsError) -> Contents {
        do {
            return try await database.read { db in
                var contents = Contents()
                contents.serial = try UInt64.fetchOne(db, sql: "SELECT value FROM meta WHERE name = 'serial'") ?? 0
                // Sized once: growing a dictionary of 100,000 keys step by step rehashes it many times.
                contents.values.reserveCapacity(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM settings") ?? 0)
                let rows = try Row.fetchCursor(db, sql: "SELECT path, type, value, serial FROM settings")
                while let row = try rows.next() {
                    let path: String = row[0]
                    do {
                        let type = try DBusType(parsing: row[1])
                        let value = try GVariantText.parse(row[2], as: type)
                        contents.values[path] = (value, row[3])
                    } catch {
                        contents.unreadable.append((path, "\(error)"))
                    }
                }
                let schemaRows = try Row.fetchCursor(
                    db,
                    sql: "SELECT path, type, default_value, summary, description, range_min, range_max, choices, secret FROM schemas")
                while let row = try schemaRows.next() {
                    let path: String = row[0]
                    do {
                        contents.schemas[path] = try StorePersistence.schema(from: row)
                    } catch {
                        contents.unreadable.append((path, "schema: \(error)"))
                    }
                }
                return contents
            }
        } catch {
            throw .storeFailure("cannot read the settings store \(path): \(error)")
        }
    }

    private static func schema(from row: Row) throws -> SettingSchema {
        let type = try DBusType(parsing: row[1])
        let defaultValue = try GVariantText.parse(row[2], as: type)
        var range: SettingRange?
        if let min: String = row[5], let max: String = row[6] {
            range = SettingRange(min: try GVariantText.parse(min, as: type), max: try GVariantText.parse(max, as: type))
        }
        var choices: [DBusValue]?
        if let text: String = row[7], case .array(_, let elements) = try GVariantText.parse(text, as: .array(type)) {
            choices = elements
        }
        return SettingSchema(
            type: type, defaultValue: defaultValue, summary: row[3], description: row[4], range: range,
            choices: choices, isSecret: (row[8] as Int) != 0)
    }

    /// Writes a group of changesets in one transaction (one fsync in full durability).
    func commit(_ batch: [ResolvedChangeset]) async throws(SettingsError) {
        guard let last = batch.last else { return }
        do {
            try await database.write { db in
                let upsert = try db.cachedStatement(
                    sql: """
                        INSERT INTO settings (path, type, value, serial) VALUES (?, ?, ?, ?)
                        ON CONFLICT(path) DO UPDATE SET type = excluded.type, value = excluded.value,
                        serial = excluded.serial
                        """)
                let delete = try db.cachedStatement(sql: "DELETE FROM settings WHERE path = ?")
                for changeset in batch {
                    for write in changeset.writes {
                        if let value = write.value {
                            try upsert.execute(arguments: [
                                write.key.rawValue, value.type.signatureText, GVariantText.format(value),
                                Int64(bitPattern: changeset.serial),
                            ])
                        } else {
                            try delete.execute(arguments: [write.key.rawValue])
                        }
                    }
                    for registration in changeset.registrations {
                        try StorePersistence.insert(registration.schema, at: registration.key.rawValue, db)
                    }
                }
                try db.execute(
                    sql: "UPDATE meta SET value = ? WHERE name = 'serial'", arguments: [Int64(bitPattern: last.serial)])
            }
        } catch {
            throw .storeFailure("cannot write to the settings store \(path): \(error)")
        }
    }

    private static func insert(_ schema: SettingSchema, at path: String, _ db: Database) throws {
        let type = schema.type
        let choices = schema.choices.map { GVariantText.format(.array(type, $0)) }
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO schemas
                (path, type, default_value, summary, description, range_min, range_max, choices, secret)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                path, type.signatureText, GVariantText.format(schema.defaultValue), schema.summary, schema.description,
                schema.range.map { GVariantText.format($0.min) }, schema.range.map { GVariantText.format($0.max) },
                choices, schema.isSecret ? 1 : 0,
            ])
    }
}
