// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// Where the store keeps its serial (format 2), and the write-ahead log file made at open, in this process
/// (no bus), against real store files.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct StoreSerialAndLogTests {
    static func reset(_ store: DurableStore, _ key: String) async throws -> UInt64 {
        try await WritePath(store: store).apply(Changeset(resets: [.key(try SettingPath(key))], origin: "test"))
    }

    static func reopen(_ store: DurableStore, _ path: String) async throws -> DurableStore {
        await StoreCalls.shutDown(store)
        return try await DurableStore.open(path: path)
    }

    static func size(of file: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? NSNumber)?.intValue
    }

    @Test func theSerialSurvivesARestartAfterStoringAndAfterRemovingTheNewestValue() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        var store = try await DurableStore.open(path: directory.store)
        _ = try await StoreCalls.set(store, "/test/serial/a", .int32(1))
        let stored = try await StoreCalls.set(store, "/test/serial/b", .int32(2))

        // When: the last commits only stored values (the serial lives in their rows).
        store = try await Self.reopen(store, directory.store)
        // Then: the store's serial is the last commit's.
        #expect(store.serial == stored)

        // When: the value holding the newest serial is removed.
        let removed = try await Self.reset(store, "/test/serial/b")
        #expect(removed == stored + 1)
        store = try await Self.reopen(store, directory.store)
        // Then: the serial still does not go back, and the next commit follows it.
        #expect(store.serial == removed)
        #expect(try await StoreCalls.set(store, "/test/serial/c", .int32(3)) == removed + 1)
        #expect(try store.get(try SettingPath("/test/serial/a")) == .int32(1))
        await StoreCalls.shutDown(store)
    }

    @Test func aFormatOneStoreKeepsItsSerialAndIsMarkedTheCurrentFormat() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let first = try await DurableStore.open(path: directory.store)
        _ = try await StoreCalls.set(first, "/test/format/a", .string("kept"))
        await StoreCalls.shutDown(first)
        // Given: a store as format 1 wrote it, whose serial is in `meta` alone (higher than any row's).
        _ = try await StoreCalls.sqlite(
            directory.store, "UPDATE meta SET value = 1 WHERE name = 'format'; UPDATE meta SET value = 41 WHERE name = 'serial';")

        // When: this broker opens it.
        let store = try await DurableStore.open(path: directory.store)
        // Then: the serial is the one it recorded, the value is there, and the file now says the current format.
        #expect(store.condition.health == .ok)
        #expect(store.serial == 41)
        #expect(try store.get(try SettingPath("/test/format/a")) == .string("kept"))
        #expect(try await StoreCalls.set(store, "/test/format/b", .int32(1)) == 42)
        await StoreCalls.shutDown(store)
        let format = try await StoreCalls.sqlite(
            directory.store, "", print: "c.execute(\"SELECT value FROM meta WHERE name = 'format'\").fetchone()[0]")
        #expect(format == "\(StorePersistence.formatVersion)")
        #expect(StorePersistence.formatVersion == 3)
    }

    /// About 2,000 durable commits: 1.8 s alone, up to 70 s beside the whole suite's fsyncs on a small machine
    /// (the suite's limit is set for it).
    @Test func theWriteAheadLogIsMadeAtOpenAndStaysWithinItsSize() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let log = directory.store + "-wal"
        let store = try await DurableStore.open(path: directory.store)
        // Given: a new store, whose log file was made at its full size before SQLite opened it.
        #expect(Self.size(of: log) == StorePersistence.logBytes)

        // When: more commits than the log holds pages.
        let commits = StorePersistence.logPages(pageSize: 4096) * 2 + 10
        for index in 0..<commits {
            _ = try await StoreCalls.set(store, "/test/log/k\(index % 50)", .int32(Int32(index)))
        }
        // Then: the log was folded into the store and started again, never growing the file.
        #expect(Self.size(of: log) == StorePersistence.logBytes)

        // When: one transaction larger than the log, then one more commit.
        let big = String(repeating: "x", count: 64 * 1024)
        let sets = try (0..<24).map { (try SettingPath("/test/log/big\($0)"), DBusValue.string(big)) }
        _ = try await WritePath(store: store).apply(Changeset(sets: sets, origin: "test"))
        #expect((Self.size(of: log) ?? 0) > StorePersistence.logBytes)
        _ = try await StoreCalls.set(store, "/test/log/after", .int32(1))
        // Then: the file is cut back to its size, and every value is there after a restart.
        #expect(Self.size(of: log) == StorePersistence.logBytes)
        let reopened = try await Self.reopen(store, directory.store)
        #expect(try reopened.get(try SettingPath("/test/log/big23")) == .string(big))
        #expect(try reopened.get(try SettingPath("/test/log/k\((commits - 1) % 50)")) == .int32(Int32(commits - 1)))
        await StoreCalls.shutDown(reopened)

        // Then: closing made the log file again (SQLite deletes it with its last connection), so that the next
        // start need not; the store opens from it with every value.
        #expect(Self.size(of: log) == StorePersistence.logBytes)
        let third = try await DurableStore.open(path: directory.store)
        #expect(third.condition.health == .ok)
        #expect(try third.get(try SettingPath("/test/log/after")) == .int32(1))
        #expect(Self.size(of: log) == StorePersistence.logBytes)
        await StoreCalls.shutDown(third)
    }

    @Test func aLogFileThatExistsIsNeverOverwrittenAtOpen() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let first = try await DurableStore.open(path: directory.store)
        _ = try await StoreCalls.set(first, "/test/log/a", .int32(1))
        await StoreCalls.shutDown(first)
        // Given: a log file of another size at the store's log path (a log SQLite left, as after a crash).
        let log = directory.store + "-wal"
        let bytes = Data(repeating: 0, count: 4096)
        try bytes.write(to: URL(fileURLWithPath: log))

        // When: the store opens.
        let store = try await DurableStore.open(path: directory.store)
        // Then: the file was not replaced by a new one of the full size, and the store opened.
        #expect(store.condition.health == .ok)
        #expect(try store.get(try SettingPath("/test/log/a")) == .int32(1))
        #expect(Self.size(of: log) == 4096)
        await StoreCalls.shutDown(store)
    }
}
