// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The store's durability setting, its backup schedule, and opening a store in states the broker tests do
/// not reach, all in this process (no bus).
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct StoreBackupTests {
    /// Starts the backups of a store, with each event delivered to a mailbox.
    static func startBackups(_ store: DurableStore, interval: Duration) async -> Mailbox<StoreBackup.Event> {
        let events = Mailbox<StoreBackup.Event>()
        store.storePersistence.backup.start(interval: interval, serial: store.serial) { events.push($0) }
        return events
    }

    static func writtenSerial(_ events: Mailbox<StoreBackup.Event>) async throws -> UInt64 {
        switch await events.next(timeLimit: .seconds(20)) {
        case .element(.written(let serial, _)): return serial
        case .element(.failed(let reason)): throw TestFailure("the backup failed: \(reason)")
        case .ended, .timedOut: throw TestFailure("no backup was written")
        }
    }

    @Test func theDefaultDurabilitySyncsEveryCommit() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let durable = try await DurableStore.open(path: directory.store)
        #expect(await durable.storePersistence.synchronousLevel() == 2)  // FULL: the WAL is synced at each commit
        durable.storePersistence.close()
        let relaxed = try await DurableStore.open(path: directory.store, durability: .relaxed)
        #expect(await relaxed.storePersistence.synchronousLevel() == 1)  // NORMAL
        relaxed.storePersistence.close()
    }

    @Test func aBackupIsWrittenAtStartUpThenAfterCommits() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let store = try await DurableStore.open(path: directory.store)

        // Given: a new store: its backup is written at once.
        let events = await Self.startBackups(store, interval: .zero)
        #expect(try await Self.writtenSerial(events) == 0)

        // When: a value is committed, then Then: a backup holding it follows.
        let serial = try await StoreCalls.set(store, "/test/backup/a", .int32(1))
        #expect(try await Self.writtenSerial(events) == serial)
        #expect(StoreBackup.serial(ofBackup: directory.backup) == serial)
        #expect(store.status()["backup-serial"] == .uint64(serial))
        await store.close()
        await store.storePersistence.backup.finish()
        store.storePersistence.close()
    }

    @Test func backupsAreSpacedByTheIntervalAndTheLastOneIsWrittenAtShutdown() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let store = try await DurableStore.open(path: directory.store)

        // Given: backups at most once an hour, the first written at start-up.
        let events = await Self.startBackups(store, interval: .seconds(3600))
        #expect(try await Self.writtenSerial(events) == 0)

        // When: values are committed, the backup stays as it was.
        var last: UInt64 = 0
        for index in 0..<5 { last = try await StoreCalls.set(store, "/test/backup/k\(index)", .int32(Int32(index))) }
        #expect(StoreBackup.serial(ofBackup: directory.backup) == 0)

        // Then: shutting down writes the last one.
        await store.close()
        await store.storePersistence.backup.finish()
        #expect(try await Self.writtenSerial(events) == last)
        #expect(StoreBackup.serial(ofBackup: directory.backup) == last)
        store.storePersistence.close()

        // And: a store that opens with a current backup does not copy it again.
        let reopened = try await DurableStore.open(path: directory.store)
        let more = await Self.startBackups(reopened, interval: .zero)
        #expect(reopened.status()["backup-serial"] == .uint64(last))
        await reopened.close()
        await reopened.storePersistence.backup.finish()
        reopened.storePersistence.close()
        more.finish()
        #expect(await more.next(timeLimit: .seconds(5)).isEnded)
    }

    @Test func afterARestartWithACurrentBackupTheFirstCommitWaitsForTheInterval() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        // Given: a store whose backup was written at its shutdown.
        let store = try await DurableStore.open(path: directory.store)
        let events = await Self.startBackups(store, interval: .seconds(3600))
        #expect(try await Self.writtenSerial(events) == 0)
        let last = try await StoreCalls.set(store, "/test/backup/restart", .int32(1))
        await store.close()
        await store.storePersistence.backup.finish()
        #expect(try await Self.writtenSerial(events) == last)
        store.storePersistence.close()

        // When: it opens again (the backup holds its serial) and commits.
        let reopened = try await DurableStore.open(path: directory.store)
        let more = await Self.startBackups(reopened, interval: .seconds(3600))
        #expect(reopened.storePersistence.backup.nextDue == nil)
        _ = try await StoreCalls.set(reopened, "/test/backup/restart", .int32(2))

        // Then: the next backup is due an interval after the last one was written, not at once.
        let due = try #require(reopened.storePersistence.backup.nextDue)
        #expect(due > ContinuousClock.now + .seconds(3000))
        #expect(StoreBackup.serial(ofBackup: directory.backup) == last)
        await StoreCalls.shutDown(reopened)
        more.finish()
    }

    @Test func aStoreOfANewerFormatIsServedReadOnlyAndLeftAlone() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let first = try await DurableStore.open(path: directory.store)
        _ = try await StoreCalls.set(first, "/test/format/a", .string("kept"))
        await StoreCalls.shutDown(first)
        // A newer broker has written format 99.
        _ = try await StoreCalls.sqlite(directory.store, "UPDATE meta SET value = 99 WHERE name = 'format';")
        let before = FileManager.default.contents(atPath: directory.store)

        let store = try await DurableStore.open(path: directory.store)
        #expect(store.condition.health == .readOnly)
        #expect(store.condition.problem?.contains("has store format 99") == true)
        #expect(store.condition.source == .store)
        #expect(try store.get(try SettingPath("/test/format/a")) == .string("kept"))
        await #expect(throws: SettingsError.storeFailure("")) { _ = try await StoreCalls.set(store, "/test/format/a", .string("x")) }
        #expect(FileManager.default.contents(atPath: directory.store) == before)
        #expect(directory.damagedFiles().isEmpty)
    }

    @Test func aLeftoverWriteAheadLogIsNotReplayedIntoANewStore() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        // Given: a `-wal` whose store file is gone.
        try Data((0..<4096).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: directory.store + "-wal"))

        // When: the store is opened, Then: it is new and healthy, and the log was moved aside, not used.
        let store = try await DurableStore.open(path: directory.store)
        #expect(store.condition.health == .ok)
        #expect(directory.names().contains { $0.hasPrefix("settings.db.orphaned-") && $0.hasSuffix("-wal") })
        #expect(try await StoreCalls.set(store, "/test/orphan/a", .int32(1)) == 1)
        await StoreCalls.shutDown(store)
    }
}

extension Mailbox.Outcome {
    var isEnded: Bool {
        if case .ended = self { return true }
        return false
    }
}
