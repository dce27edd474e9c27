// SPDX-License-Identifier: Apache-2.0

import DBus
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel
import Testing

/// What a commit reports for its `Changed` signal, in this process (no bus), against a real store file.
@Suite(.timeLimit(.minutes(1)))
struct CommittedChangeTests {
    @Test func valuesAreInKeyOrderAlsoWhenARegistrationAddsAKey() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let store = try await DurableStore.open(path: directory.store)
        let changes = Mailbox<CommittedChange>()
        store.setCommitHandler { committed in committed.forEach(changes.push) }
        _ = try await StoreCalls.set(store, "/test/order/a", .int32(1))
        guard case .element = await changes.next(timeLimit: .seconds(10)) else {
            Issue.record("no change reported for the first commit")
            return
        }

        // When: one changeset sets keys out of order and registers a schema of another type for a stored key,
        // whose effective value becomes the schema's default.
        _ = try await store.apply(
            Changeset(
                sets: [(try SettingPath("/test/order/c"), .int32(3)), (try SettingPath("/test/order/b"), .int32(2))],
                registrations: [(try SettingPath("/test/order/a"), SettingSchema(defaultValue: .string("default")))],
                origin: "test"))

        // Then: its change lists every changed key once, in key order.
        guard case .element(let change) = await changes.next(timeLimit: .seconds(10)) else {
            Issue.record("no change reported for the second commit")
            return
        }
        #expect(change.values.map(\.key) == ["/test/order/a", "/test/order/b", "/test/order/c"])
        #expect(change.values.map(\.value) == [.string("default"), .int32(2), .int32(3)])
        #expect(change.removed.isEmpty)
        await StoreCalls.shutDown(store)
    }
}
