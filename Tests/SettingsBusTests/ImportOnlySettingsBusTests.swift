// SPDX-License-Identifier: Apache-2.0

// An app's code that imports SettingsBus and nothing else of this package: keys of the app's own types,
// stores, streams, transactions, descriptions and errors, with nothing but the names `import SettingsBus`
// brings (AppNamespaceTests lists them). Keep it free of `import DBus`, `import SettingsModel` and
// `@testable`: a name an app needs that SettingsBus does not bring stops this file from compiling.

import Foundation
import SettingsBus
import Testing
import TestMachine

/// A record stored as `a{sv}`, as an app writes one.
private struct WindowSize: Codable, SettingValue, Hashable {
    var width: Int32
    var height: Int32
    static let settingRepresentation = SettingRepresentations.Codable<WindowSize>()
}

private enum Accent: String, SettingValue, CaseIterable { case blue, green }

extension SettingKey {
    fileprivate static var windowSize: SettingKey<WindowSize> {
        .init("/org/example/app/window-size", default: WindowSize(width: 640, height: 480))
    }
    fileprivate static var accent: SettingKey<Accent> { .init("/org/example/app/accent", default: .blue) }
}

@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct ImportOnlySettingsBusTests {
    @MainActor @Test func anAppThatImportsOnlySettingsBusUsesItsKeysStoresStreamsAndTransactions() async throws {
        // A store on a bus is made without connecting.
        let bus: BusSettingsStore.Bus = .address("unix:path=/nonexistent/settings-bus-test")
        let remote = BusSettingsStore(bus: bus, timeout: .seconds(1))
        await remote.close()
        #expect([BusSettingsStore.Bus.session, .system, bus].count == 3)

        let store: any SettingsStore = InMemorySettingsStore()
        try await store.register(.windowSize, .accent)
        try await store.set(.windowSize, to: WindowSize(width: 800, height: 600))
        #expect(try await store.get(.windowSize) == WindowSize(width: 800, height: 600))
        let status: ConnectionStatus = store.connectionStatus
        #expect(status == .connected)

        var transaction = SettingsTransaction()
        try transaction.set(.accent, to: .green)
        try transaction.set(.windowSize, to: WindowSize(width: 1024, height: 768))
        let serial = try await store.commit(transaction)
        let description: SettingDescription = try await store.describe(.accent)
        #expect(description.isWritable && description.serial == serial)
        let path: SettingPath = description.key
        #expect(path == SettingKey<Accent>.accent.path)

        let values: SettingKey<Accent>.Values = store.values(for: .accent)
        for await accent in values {
            #expect(accent == .green)
            break
        }
        let changes: SettingKey<Accent>.Changes = store.changes(for: .accent)
        changes.stop()
        let change: SettingChange<Accent>.Kind? = nil
        #expect(change == nil)
        let observed = ObservedSetting(.accent, in: store)
        #expect(observed.value == .green)
        do {
            try await store.set(.accent, to: .blue)
            var conflicting = SettingsTransaction(ifSerial: 0)
            try conflicting.set(.accent, to: .green)
            _ = try await store.commit(conflicting)
            Issue.record("a commit at an old serial succeeded")
        } catch {
            let error: SettingsError = error
            #expect(error.code == .conflict)
        }
    }
}
