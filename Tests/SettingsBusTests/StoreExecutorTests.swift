// SPDX-License-Identifier: Apache-2.0

@testable import DBus
@testable import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// `values(for:)` consumed in a task that prefers the store's executor: each change reaches it on the thread
/// of the store's connection, from the first value on.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct StoreExecutorTests {
    @Test func aStreamConsumedOnTheStoresExecutorFollowsChangesOnItsConnectionsThread() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            // Given: a store not yet connected, and a task preferring its executor that follows a key.
            let store = BusSettingsStore(bus: .address(bus.address))
            let key = SettingKey("/test/executor/theme", default: "default")
            let received = Mailbox<(value: String, onConnectionThread: Bool)>()
            let consumer = Task(executorPreference: store.executor) {
                for await value in store.values(for: key) {
                    let onThread = store.link.openConnection?.loop.isLoopThread ?? false
                    received.push((value, onThread))
                }
            }
            defer { consumer.cancel() }
            // The first value waits for the connection and a GetMany: under a whole test run on two CPUs this
            // once took more than 20 s.
            guard case .element(let first) = await received.next(timeLimit: .seconds(90)) else {
                Issue.record("no first value within 90 s")
                return
            }
            #expect(first.value == "default")

            // When: another process's store writes the key, one value at a time.
            let writer = BusSettingsStore(bus: .address(bus.address))
            for value in ["light", "dark", "contrast"] {
                try await writer.set(key, to: value)
                // Then: each value arrives, on the connection's thread.
                guard case .element(let change) = await received.next(timeLimit: .seconds(20)) else {
                    Issue.record("\(value) did not arrive")
                    break
                }
                #expect(change.value == value)
                #expect(change.onConnectionThread)
            }
            await writer.close()
            await store.close()
            #expect(await broker.stop() == 0)
        }
    }
}
