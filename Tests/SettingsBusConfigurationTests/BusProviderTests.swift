// SPDX-License-Identifier: Apache-2.0

import Configuration
import ConfigurationTesting
import DBus
import SettingsBus
import SettingsBusConfiguration
import SettingsBusTesting
import Testing
import SettingsModel
import TestMachine

/// The provider with the real broker on a private bus, read through a `ConfigReader` next to
/// swift-configuration's own providers, and written by other processes.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct BusProviderTests {
    static let directory = try! SettingDirectory("/org/example/")

    /// Runs `settingsctl` on `bus` and expects it to succeed.
    static func settingsctl(_ bus: TestBus, _ arguments: [String]) async throws {
        let result = try await TestProcess.run(
            try BuiltProduct.path("settingsctl"), arguments, environment: bus.environment)
        #expect(result.status == 0, "settingsctl \(arguments.joined(separator: " ")): \(result.stderr)")
    }

    @Test func aReaderTakesAnOverrideFirstAndFollowsAnotherProcesssWrites() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Self.settingsctl(bus, ["set", "/org/example/editor/font-size", "12"])
            try await Self.settingsctl(bus, ["set", "/org/example/editor/theme", "'light'"])
            try await Self.settingsctl(bus, ["set", "/org/example/editor/ligatures", "true"])

            let settings = BusSettingsStore(bus: .address(bus.address))
            let provider = try await SettingsBusProvider(store: settings, directory: Self.directory)
            let overrides = InMemoryProvider(name: "overrides", values: ["editor.theme": "dark"])
            let config = ConfigReader(providers: [overrides, provider])

            // Reading: the override comes first; the rest is the bus's, converted (the int32 12 is an Int).
            #expect(config.string(forKey: "editor.theme") == "dark")
            #expect(config.int(forKey: "editor.font-size") == 12)
            #expect(config.bool(forKey: "editor.ligatures") == true)
            #expect(config.int(forKey: "editor.tab-width", default: 4) == 4)
            #expect(try await config.fetchInt(forKey: "editor.font-size") == 12)

            // A change by another process reaches a watch of the reader, and the reader's synchronous reads.
            try await config.watchInt(forKey: "editor.font-size", default: 10) { sizes in
                var sizes = sizes.makeAsyncIterator()
                #expect(try await sizes.next() == 12)
                try await Self.settingsctl(bus, ["set", "/org/example/editor/font-size", "14"])
                #expect(try await sizes.next() == 14)
                #expect(config.int(forKey: "editor.font-size") == 14)
                try await Self.settingsctl(bus, ["reset", "/org/example/editor/font-size"])
                #expect(try await sizes.next() == 10)
            }
            #expect(config.int(forKey: "editor.font-size") == nil)

            // A whole snapshot follows too, and a new key below the directory appears in it.
            try await config.watchSnapshot { snapshots in
                var snapshots = snapshots.makeAsyncIterator()
                #expect(try await snapshots.next()?.string(forKey: "editor.font-family") == nil)
                try await Self.settingsctl(bus, ["set", "/org/example/editor/font-family", "'Mono'"])
                let next = try await snapshots.next()
                #expect(next?.string(forKey: "editor.font-family") == "Mono")
                #expect(next?.string(forKey: "editor.theme") == "dark")
            }
            await settings.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func passesSwiftConfigurationsProviderCompatibilityTestOverTheBus() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let writer = BusSettingsStore(bus: .address(bus.address))
            try await writer.commit(try CompatValues.transaction(in: Self.directory))
            await writer.close()

            let settings = BusSettingsStore(bus: .address(bus.address))
            let provider = try await SettingsBusProvider(store: settings, directory: Self.directory)
            try await ProviderCompatTest(provider: provider).runTest()
            await settings.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aWriteOfAnotherConnectionReachesWatchValue() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let settings = BusSettingsStore(bus: .address(bus.address))
            let writer = BusSettingsStore(bus: .address(bus.address))
            let provider = try await SettingsBusProvider(store: settings, directory: Self.directory)
            let key = SettingKey<[String]>("/org/example/recent-files", default: [])
            try await provider.watchValue(forKey: "recent-files", type: .stringArray) { updates in
                var updates = updates.makeAsyncIterator()
                #expect(try await updates.next()?.get().value == nil)
                try await writer.set(key, to: ["a.txt", "b.txt"])
                #expect(try await updates.next()?.get().value?.content == .stringArray(["a.txt", "b.txt"]))
                // A value the type does not convert from is a failure of the stream, not its end.
                try await writer.commit({
                    var transaction = SettingsTransaction()
                    transaction.set(key.path, to: .int32(3))
                    return transaction
                }())
                let failure = try #require(await updates.next())
                #expect(throws: SettingsError.typeMismatch("")) { try failure.get() }
                try await writer.set(key, to: ["c.txt"])
                #expect(try await updates.next()?.get().value?.content == .stringArray(["c.txt"]))
            }
            await writer.close()
            await settings.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func withoutABrokerTheProviderIsNotMadeAndSaysWhy() async throws {
        try await withTestBus { bus in
            let settings = BusSettingsStore(bus: .address(bus.address), timeout: .seconds(5))
            let error = await #expect(throws: SettingsError.self) {
                _ = try await SettingsBusProvider(store: settings, directory: Self.directory)
            }
            #expect(error?.code == .brokerUnavailable, "\(String(describing: error))")
            #expect(error?.message.contains("scripts/install") == true, "\(error?.message ?? "")")
            await settings.close()
        }
    }
}
