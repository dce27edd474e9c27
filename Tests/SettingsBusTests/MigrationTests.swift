// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// Moving a value from a retired key to a new one: once, atomically, the same in memory and over the bus, and
/// with several processes of an app starting at once.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct MigrationTests {
    static let old = try! SettingPath("/test/migrate/font-size")
    static let new = SettingKey("/test/migrate/text-size", default: 11.0)

    static func points(_ old: DBusValue) -> Double? {
        if case .int32(let points) = old { return Double(points) }
        return nil
    }

    /// Runs the same checks on a store.
    static func check(_ store: some SettingsStore) async throws {
        // Nothing to move: no value, nothing done.
        #expect(try await store.migrate(from: Self.old, to: Self.new, Self.points) == false)

        // Given: a value under the old key. When: migrated. Then: it moved, and the old key is reset.
        var transaction = SettingsTransaction()
        transaction.set(Self.old, to: .int32(14))
        try await store.commit(transaction)
        #expect(try await store.migrate(from: Self.old, to: Self.new, Self.points) == true)
        #expect(try await store.get(Self.new) == 14)
        #expect(try await store.read([Self.old]).values[Self.old] == nil)
        // And: a second run does nothing.
        #expect(try await store.migrate(from: Self.old, to: Self.new, Self.points) == false)
        #expect(try await store.get(Self.new) == 14)

        // Given: both keys with user values. Then: the new key keeps its own, and the old one is reset.
        transaction = SettingsTransaction()
        transaction.set(Self.old, to: .int32(20))
        try await store.commit(transaction)
        try await store.set(Self.new, to: 16)
        #expect(try await store.migrate(from: Self.old, to: Self.new, Self.points) == false)
        #expect(try await store.get(Self.new) == 16)
        #expect(try await store.read([Self.old]).values[Self.old] == nil)
    }

    @Test func aValueMovesOnceInMemory() async throws {
        try await Self.check(InMemorySettingsStore())
    }

    @Test func aValueMovesOnceOverTheBus() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let store = BusSettingsStore(bus: .address(bus.address))
            try await Self.check(store)
            await store.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// Eight copies of an app start at once, each on its own connection, and run the same migration: exactly
    /// one moves the value.
    @Test func copiesOfAnAppStartingAtOnceMoveTheValueOnce() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let setup = BusSettingsStore(bus: .address(bus.address))
            var transaction = SettingsTransaction()
            transaction.set(Self.old, to: .int32(18))
            try await setup.commit(transaction)
            let stores = (0..<8).map { _ in BusSettingsStore(bus: .address(bus.address)) }

            let moved = try await withThrowingTaskGroup(of: Bool.self) { group in
                for store in stores {
                    group.addTask { try await store.migrate(from: Self.old, to: Self.new, Self.points) }
                }
                var moved = 0
                for try await didMove in group where didMove { moved += 1 }
                return moved
            }

            #expect(moved == 1)
            #expect(try await setup.get(Self.new) == 18)
            #expect(try await setup.read([Self.old]).values[Self.old] == nil)
            for store in stores { await store.close() }
            await setup.close()
            #expect(await broker.stop() == 0)
        }
    }
}
