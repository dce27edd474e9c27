// SPDX-License-Identifier: Apache-2.0

import Foundation
import Observation
import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// What a UI sees at start-up: preloaded keys start with their stored values, and a store with no broker says
/// so and gives defaults instead of waiting silently.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct StartUpTests {
    static let theme = SettingKey("/org/example/app/theme", default: "light")
    static let fontSize = SettingKey("/org/example/app/font-size", default: 11)

    static let gdbusSet = [
        "call", "--session", "--dest", "io.github.settingsbus.Settings1", "--object-path",
        "/io/github/settingsbus/Settings1", "--method", "io.github.settingsbus.Settings1.Set",
    ]

    @Test func aPreloadedKeyStartsWithItsStoredValueAndFollowsChanges() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            // Given: a stored `dark` for a key whose default is `light`, written by another process.
            let writer = BusSettingsStore(bus: .address(bus.address))
            try await writer.register(Self.theme)
            try await writer.register(Self.fontSize)
            try await writer.set(Self.theme, to: "dark")
            try await writer.set(Self.fontSize, to: 13)
            await writer.close()

            // When: a new store preloads the keys.
            let settings = BusSettingsStore(bus: .address(bus.address))
            try await settings.preload(Self.theme, Self.fontSize)

            // Then: the local copy answers, and an observed setting starts with the stored value, with no await
            // between its making and its first value.
            #expect(settings.cached(Self.theme) == "dark")
            #expect(settings.cached(Self.fontSize) == 13)
            let (observed, first) = await MainActor.run {
                let observed = ObservedSetting(Self.theme, in: settings)
                return (observed, observed.value)
            }
            #expect(first == "dark")

            // When: another process changes both keys; Then: the observed setting and the local copy follow.
            let changes = Collector(settings.changes(for: Self.fontSize))
            defer { changes.stop() }
            let seen = Mailbox<String>()
            await Self.track({ observed.value }, into: seen)
            for (key, text) in [(Self.theme.path, "<'blue'>"), (Self.fontSize.path, "<int64 15>")] {
                let result = try await TestProcess.run(
                    "/usr/bin/gdbus", Self.gdbusSet + [key.rawValue, text], environment: bus.environment)
                #expect(result.status == 0, "\(result.stderr)")
            }
            var values: [String] = []
            while values.last != "blue", case .element(let value) = await seen.next(timeLimit: .seconds(20)) {
                values.append(value)
            }
            #expect(values.last == "blue")
            #expect(settings.cached(Self.theme) == "blue")
            #expect(try await changes.next(where: { $0.value == 15 }).value == 15)
            #expect(settings.cached(Self.fontSize) == 15)
            _ = observed
            await settings.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func inMemoryPreloadChangesNothing() async throws {
        let settings = InMemorySettingsStore()
        try await settings.register(Self.theme)
        try await settings.set(Self.theme, to: "dark")
        try await settings.preload(Self.theme, Self.fontSize)
        #expect(settings.cached(Self.theme) == "dark")
        #expect(settings.connectionStatus == .connected)
    }

    @Test func withoutABrokerStreamsGiveDefaultsAndTheStatusSaysWhyUntilOneStarts() async throws {
        // Given: a store that already holds `dark`, served by no broker yet.
        let storeDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-\(UUID())")
        try FileManager.default.createDirectory(at: storeDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: storeDirectory) }
        let storePath = storeDirectory.appendingPathComponent("settings.db").path
        try await withTestBus { elsewhere in
            let broker = try await TestBroker.start(on: elsewhere, storePath: storePath)
            let writer = BusSettingsStore(bus: .address(elsewhere.address))
            try await writer.register(Self.theme)
            try await writer.set(Self.theme, to: "dark")
            await writer.close()
            #expect(await broker.stop() == 0)
        }

        try await withTestBus { bus in
            // When: a store on a bus with no broker and no activation file is watched.
            let settings = BusSettingsStore(bus: .address(bus.address))
            #expect(settings.connectionStatus == .connecting)
            let values = Collector(settings.values(for: Self.theme))
            defer { values.stop() }
            let statuses = Collector(settings.connectionStatuses())
            defer { statuses.stop() }
            let observed = await ObservedSetting(Self.theme, in: settings)
            let observedStatuses = Mailbox<ConnectionStatus>()
            await Self.track({ observed.status }, into: observedStatuses)
            let observedValues = Mailbox<String>()
            await Self.track({ observed.value }, into: observedValues)

            // Then: the stream gives the default at once, and the status names the error.
            #expect(try await values.next(timeLimit: .seconds(10)) == "light")
            let unavailable = try await statuses.next(where: { $0 != .connecting }, timeLimit: .seconds(10))
            guard case .unavailable(let error) = unavailable else {
                Issue.record("status \(unavailable)")
                return
            }
            #expect(error.code == .brokerUnavailable)
            #expect(settings.connectionStatus == .unavailable(SettingsError(.brokerUnavailable, "")))
            do throws(SettingsError) {
                _ = try await settings.get(Self.fontSize)
                Issue.record("a read without a broker succeeded")
            } catch {
                #expect(error.code == .brokerUnavailable)
            }

            // When: the broker starts later; Then: connected, and the stream and the observed setting give
            // the stored value.
            let broker = try await TestBroker.start(on: bus, storePath: storePath)
            #expect(try await statuses.next(where: { $0 == .connected }) == .connected)
            #expect(try await values.next() == "dark")
            var seen: [ConnectionStatus] = []
            while seen.last != .connected,
                case .element(let status) = await observedStatuses.next(timeLimit: .seconds(20))
            {
                seen.append(status)
            }
            #expect(seen.last == .connected)
            // The observed setting's value comes from its own stream of the watch, and its status from the
            // store's: the value may follow the status by a moment.
            var value = await observed.value
            while value != "dark", case .element(let next) = await observedValues.next(timeLimit: .seconds(20)) {
                value = next
            }
            #expect(value == "dark")
            #expect(await observed.status == .connected)

            // When: the broker stops; Then: the status says so.
            #expect(await broker.stop() == 0)
            let left = try await statuses.next(where: { $0 != .connected })
            #expect(left == .unavailable(SettingsError(.brokerUnavailable, "")))
            await settings.close()
        }
    }

    @Test func anObservedSettingIsNotWritableTheMomentAnAdministratorLocksIt() async throws {
        let admin = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-admin-\(UUID())")
        try FileManager.default.createDirectory(
            at: admin.appendingPathComponent("locks.d"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: admin) }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.path])
            let settings = BusSettingsStore(bus: .address(bus.address))
            try await settings.register(Self.theme)
            let observed = await ObservedSetting(Self.theme, in: settings)
            let writable = Mailbox<Bool>()
            await Self.track({ observed.isWritable }, into: writable)
            #expect(await observed.isWritable)

            // When: the administrator locks the key; Then: it is not writable.
            let lockFile = admin.appendingPathComponent("locks.d/site")
            try "\(Self.theme.path.rawValue)\n".write(to: lockFile, atomically: true, encoding: .utf8)
            #expect(await Self.waitFor(false, in: writable))
            #expect(await observed.isWritable == false)

            // When: the lock is lifted; Then: writable again.
            try FileManager.default.removeItem(at: lockFile)
            #expect(await Self.waitFor(true, in: writable))
            await settings.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// Whether `mailbox` receives `value` within 20 seconds.
    static func waitFor<Value: Equatable & Sendable>(_ value: Value, in mailbox: Mailbox<Value>) async -> Bool {
        while case .element(let next) = await mailbox.next(timeLimit: .seconds(20)) {
            if next == value { return true }
        }
        return false
    }

    /// Pushes what `read` answers into `mailbox` after every change that observation reports.
    @MainActor static func track<Value: Sendable>(
        _ read: @escaping @MainActor () -> Value, into mailbox: Mailbox<Value>
    ) {
        withObservationTracking { _ = read() } onChange: {
            Task { @MainActor in
                mailbox.push(read())
                track(read, into: mailbox)
            }
        }
    }
}
