// SPDX-License-Identifier: Apache-2.0

import DBus
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// What a commit reports for its `Changed` signal, in this process (no bus), against a real store file.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct CommittedChangeTests {
    @Test func valuesAreInKeyOrderAlsoWhenARegistrationAddsAKey() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let store = try await DurableStore.open(path: directory.store)
        _ = try await StoreCalls.set(store, "/test/order/a", .int32(1))
        // The writer is answered before its commit queue lets go of the store: the changeset below starts a
        // commit of its own only once it has.
        await store.flush()

        // When: one changeset sets keys out of order and registers a schema of another type for a stored key,
        // whose effective value becomes the schema's default, and is committed.
        let staged = store.stage(
            Changeset(
                sets: [(try SettingPath("/test/order/c"), .int32(3)), (try SettingPath("/test/order/b"), .int32(2))],
                registrations: [(try SettingPath("/test/order/a"), SettingSchema(defaultValue: .string("default")))],
                origin: "test"),
            for: .then { _ in })
        guard case .staged(startsCommit: true, _) = staged, let batch = store.takeBatch(limit: nil),
            let outcome = store.commit(batch)
        else {
            Issue.record("the changeset was not staged and committed: \(staged)")
            return
        }
        #expect(store.endCommitting())

        // Then: its change lists every changed key once, in key order.
        guard outcome.changes.count == 1, let change = outcome.changes.first else {
            Issue.record("one change expected, got \(outcome.changes.count)")
            return
        }
        #expect(change.values.map(\.key) == ["/test/order/a", "/test/order/b", "/test/order/c"])
        #expect(change.values.map(\.value) == [.string("default"), .int32(2), .int32(3)])
        // The registered key has nothing but its schema's default: it is listed as removed as well.
        #expect(change.removed == ["/test/order/a"])
        await StoreCalls.shutDown(store)
    }
}
