// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// A store of format 2, written before the history existed, opens: its values are kept, it gets the history's
/// tables (format 3), and commits from then on are recorded.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct StoreHistoryFormatTests {
    @Test func aFormatTwoStoreOpensAndRecordsHistoryFromThenOn() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let first = try await DurableStore.open(path: directory.store)
        _ = try await StoreCalls.set(first, "/test/old/a", .string("kept"))
        await StoreCalls.shutDown(first)
        // Given: the store as a format 2 broker left it: no history tables.
        _ = try await StoreCalls.sqlite(
            directory.store,
            "DROP TABLE history; DROP TABLE history_writers; UPDATE meta SET value = 2 WHERE name = 'format';")

        // When: this broker opens it and writes.
        let store = try await DurableStore.open(path: directory.store)
        #expect(store.condition.health == .ok)
        #expect(try store.get(try SettingPath("/test/old/a")) == .string("kept"))
        #expect(try await store.history(Settings1.HistoryRequest()).isEmpty)
        let serial = try await StoreCalls.set(store, "/test/old/a", .string("new"))

        // Then: the write is in the history, with the value from before the upgrade.
        let commits = try await store.history(Settings1.HistoryRequest())
        #expect(commits.map(\.serial) == [serial])
        #expect(commits.first?.changes == [.init(key: "/test/old/a", old: .string("kept"), new: .string("new"))])
        await StoreCalls.shutDown(store)
        let format = try await StoreCalls.sqlite(
            directory.store, "", print: "c.execute(\"SELECT value FROM meta WHERE name = 'format'\").fetchone()[0]")
        #expect(format == "3")
    }
}
