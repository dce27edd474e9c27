// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel
import SyncProtocol
import Testing
import TestMachine

/// The store's side of sync: with sync on, a commit queues the writes of synced keys in the same transaction,
/// never those of secret or machine-local keys nor of keys outside the synced directories; remote changes are
/// recorded, not queued; with sync off nothing is queued; an old store opens and gains the tables.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct SyncOutboxTests {
    static func key(_ text: String) throws -> SettingPath { try SettingPath(text) }

    static func settings() throws -> SyncSettings {
        SyncSettings(directories: [try SettingDirectory("/sync/")], machine: "machine-a")
    }

    @Test func secretAndMachineLocalKeysAndKeysOutsideTheSyncedDirectoriesAreNeverQueued() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("settings.db").path
        let store = try await DurableStore.open(path: path)
        store.enableSync(try Self.settings())

        // Given: a secret key and a machine-local key registered under the synced directory.
        _ = try await WritePath(store: store).apply(
            Changeset(
                registrations: [
                    (try Self.key("/sync/token"), SettingSchema(defaultValue: .string(""), isSecret: true)),
                    (try Self.key("/sync/monitor"), SettingSchema(defaultValue: .int32(0), isMachineLocal: true)),
                ], origin: "test"))
        // When: one commit writes them, a plain key beside them and a key outside the synced directory, and a
        // second commit resets the plain key.
        _ = try await WritePath(store: store).apply(
            Changeset(
                sets: [
                    (try Self.key("/sync/token"), .string("hunter2")), (try Self.key("/sync/monitor"), .int32(2)),
                    (try Self.key("/sync/theme"), .string("dark")), (try Self.key("/other/x"), .int32(1)),
                ], origin: "test"))
        let queuedAfterSet = try await store.queuedSyncChanges(limit: 100)
        _ = try await WritePath(store: store).apply(Changeset(resets: [.key(try Self.key("/sync/theme"))], origin: "test"))

        // Then: only the plain key was queued, with the value, then replaced by its reset (a tombstone).
        #expect(queuedAfterSet.map(\.key.rawValue) == ["/sync/theme"])
        #expect(queuedAfterSet.first?.value == .string("dark"))
        #expect(queuedAfterSet.first?.version.machine == "machine-a")
        let queued = try await store.queuedSyncChanges(limit: 100)
        #expect(queued.map(\.key.rawValue) == ["/sync/theme"])
        #expect(queued.first?.value == nil)
        #expect(queued.first!.version > queuedAfterSet.first!.version)
        await store.close()
        store.persistence.close()

        // The file holds no value of the secret or machine-local key in the queue (read with sqlite3).
        let dump = try await runSQLite(path, "SELECT path FROM sync_outbox UNION ALL SELECT path FROM sync_versions")
        #expect(!dump.contains("token") && !dump.contains("monitor"), "\(dump)")
    }

    /// The sync engine compares a pulled change with the local versions before committing it; a local write
    /// made in between is newer (its clock is read once the clock has seen the pulled one) and must not be
    /// replaced by the pulled value, not even for a moment.
    @Test func aLocalWriteMadeAfterTheVersionsWereComparedIsNotReplacedByTheRemoteChange() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = try await DurableStore.open(path: directory.url.appendingPathComponent("settings.db").path)
        let settings = try Self.settings()
        store.enableSync(settings)
        let key = try Self.key("/sync/theme")
        _ = try await WritePath(store: store).apply(Changeset(sets: [(key, .string("before"))], origin: "test"))

        // Given: the engine's steps before a commit: the clock sees the pulled version, the serial is read and
        // the local versions (older than the pulled one) are read.
        let remote = SyncVersion(clock: settings.clock.tick() + (1 << 24), machine: "machine-b")
        settings.clock.observe(remote.clock)
        let checked = store.serial
        let local = try await store.syncVersions(of: [key])
        #expect(try #require(local[key]) < remote)
        // And: a local write in between.
        _ = try await WritePath(store: store).apply(Changeset(sets: [(key, .string("mine"))], origin: "test"))

        // When: the pulled change is committed.
        var changeset = Changeset(sets: [(key, .string("theirs"))], origin: DurableStore.syncOrigin(machineName: "b"))
        changeset.remote = RemoteChanges(versions: [key: remote], cursor: 7, checkedSerial: checked)
        _ = try await WritePath(store: store).apply(changeset)

        // Then: the local write stays, with a version newer than the pulled one, queued for the database.
        #expect(try store.get(key) == .string("mine"))
        let versions = try await store.syncVersions(of: [key])
        #expect(try #require(versions[key]) > remote)
        let queued = try await store.queuedSyncChanges(limit: 10)
        #expect(queued.map(\.value) == [.string("mine")])
        #expect(try #require(queued.first).version > remote)
        // A commit of remote changes alone is not fsynced by itself; the store's durability is back after it.
        #expect(await store.persistence.synchronousLevel() == 2)
        await store.close()
        store.persistence.close()
    }

    @Test func writesOfOneCommitShareOneVersionAndTheQueueSurvivesAReopen() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("settings.db").path
        do {
            let store = try await DurableStore.open(path: path)
            store.enableSync(try Self.settings())
            _ = try await WritePath(store: store).apply(
                Changeset(sets: [(try Self.key("/sync/a"), .int32(1)), (try Self.key("/sync/b"), .int32(2))], origin: "t"))
            await store.close()
            store.persistence.close()
        }
        let store = try await DurableStore.open(path: path)
        let queued = try await store.queuedSyncChanges(limit: 100)
        #expect(queued.map(\.key.rawValue) == ["/sync/a", "/sync/b"])
        #expect(Set(queued.map(\.version)).count == 1)
        let versions = try await store.syncVersions(of: [try Self.key("/sync/a")])
        #expect(versions[try Self.key("/sync/a")] == queued.first?.version)
        await store.close()
        store.persistence.close()
    }

    @Test func remoteChangesAreRecordedNotQueuedAndSyncOffQueuesNothing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("settings.db").path
        let store = try await DurableStore.open(path: path)
        // Sync off: nothing is queued.
        _ = try await WritePath(store: store).apply(Changeset(sets: [(try Self.key("/sync/early"), .int32(1))], origin: "t"))
        #expect(try await store.queuedSyncCount() == 0)

        store.enableSync(try Self.settings())
        let remoteVersion = SyncVersion(clock: 42 << 16, machine: "machine-b")
        var changeset = Changeset(sets: [(try Self.key("/sync/remote"), .string("from b"))], origin: "sync:b")
        changeset.remote = RemoteChanges(versions: [try Self.key("/sync/remote"): remoteVersion], cursor: 7)
        _ = try await WritePath(store: store).apply(changeset)
        #expect(try await store.queuedSyncCount() == 0)
        #expect(try await store.syncVersions(of: [try Self.key("/sync/remote")]).values.first == remoteVersion)
        #expect(try await store.syncState("cursor") == 7)
        await store.close()
        store.persistence.close()
    }

    @Test func aKeyMadeSecretLaterLeavesNoValueQueuedAndQueuesAResetOfWhatTheDatabaseHas() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("settings.db").path
        let store = try await DurableStore.open(path: path)
        store.enableSync(try Self.settings())
        let pushed = try Self.key("/sync/token")
        let queuedOnly = try Self.key("/sync/pin")
        let untouched = try Self.key("/sync/fresh")
        // Given: a value of /sync/token the database has taken (acknowledged), and one of /sync/pin still
        // queued.
        _ = try await WritePath(store: store).apply(Changeset(sets: [(pushed, .string("hunter2"))], origin: "t"))
        let first = try await store.queuedSyncChanges(limit: 10)
        try await store.acknowledgeSyncChanges(first, as: first.map(\.version), cursor: nil)
        #expect(try await store.queuedSyncCount() == 0)
        _ = try await WritePath(store: store).apply(Changeset(sets: [(queuedOnly, .string("1234"))], origin: "t"))

        // When: both are registered again as secret, with a key that never had a value.
        _ = try await WritePath(store: store).apply(
            Changeset(
                registrations: [pushed, queuedOnly, untouched].map { ($0, SettingSchema(defaultValue: .string(""), isSecret: true)) },
                origin: "t"))

        // Then: each of the two is queued as a reset (a tombstone), newer than its value; the fresh key is not.
        let queued = try await store.queuedSyncChanges(limit: 10)
        #expect(Set(queued.map(\.key)) == [pushed, queuedOnly])
        #expect(queued.allSatisfy { $0.value == nil })
        #expect(queued.allSatisfy { $0.version > first[0].version })
        // And: a later write of the secret keys queues nothing.
        _ = try await WritePath(store: store).apply(Changeset(sets: [(pushed, .string("hunter3"))], origin: "t"))
        #expect(try await store.queuedSyncChanges(limit: 10).allSatisfy { $0.value == nil })
        await store.close()
        store.persistence.close()
        let dump = try await runSQLite(path, "SELECT path, IFNULL(value, 'NULL') FROM sync_outbox;")
        #expect(!dump.contains("hunter") && !dump.contains("1234"), "\(dump)")
    }

    @Test func aStoreWithoutTheSyncTablesOpensAndKeepsItsSchemas() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("settings.db").path
        // A store as the previous broker wrote it: no sync tables, no machine_local column.
        _ = try await runSQLite(
            path,
            """
            PRAGMA journal_mode = WAL;
            CREATE TABLE meta (name TEXT PRIMARY KEY NOT NULL, value) WITHOUT ROWID;
            CREATE TABLE settings (path TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL, value TEXT NOT NULL,
                serial INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE schemas (path TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL, default_value TEXT NOT NULL,
                summary TEXT, description TEXT, range_min TEXT, range_max TEXT, choices TEXT,
                secret INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
            INSERT INTO meta VALUES ('format', 2), ('serial', 3);
            INSERT INTO settings VALUES ('/sync/kept', 'i', '5', 3);
            INSERT INTO schemas (path, type, default_value, secret) VALUES ('/sync/secret', 's', '', 1);
            """)
        let store = try await DurableStore.open(path: path)
        #expect(store.condition.health == .ok)
        #expect(store.serial == 3)
        #expect(store.userValueCount == 1)
        // A machine-local registration is kept across a reopen.
        _ = try await WritePath(store: store).apply(
            Changeset(
                registrations: [(try Self.key("/sync/local"), SettingSchema(defaultValue: .int32(0), isMachineLocal: true))],
                origin: "t"))
        await store.close()
        store.persistence.close()
        let reopened = try await DurableStore.open(path: path)
        #expect(reopened.registeredSchema(of: try Self.key("/sync/local"))?.isMachineLocal == true)
        #expect(reopened.registeredSchema(of: try Self.key("/sync/secret"))?.isSecret == true)
        await reopened.close()
        reopened.persistence.close()
    }
}

/// Runs `sqlite3` on a file and returns its output.
func runSQLite(_ path: String, _ sql: String) async throws -> String {
    let result = try await TestProcess.run("/usr/bin/sqlite3", [path], input: sql)
    #expect(result.status == 0, "\(result.stderr)")
    return result.stdout
}
