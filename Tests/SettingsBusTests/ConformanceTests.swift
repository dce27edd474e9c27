// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// The shared conformance suite, run against both stores.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ConformanceTests {
    @Test(arguments: SettingsStoreConformance.checks)
    func inMemoryStoreConforms(_ check: SettingsStoreConformance.Check) async throws {
        try await check.run(on: InMemorySettingsStore())
    }

    @Test(arguments: SettingsStoreConformance.checks)
    func busStoreConforms(_ check: SettingsStoreConformance.Check) async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let store = BusSettingsStore(bus: .address(bus.address))
            do {
                try await check.run(on: store)
            } catch {
                await store.close()
                await broker.stop()
                throw error
            }
            await store.close()
            #expect(await broker.stop() == 0)
        }
    }
}
