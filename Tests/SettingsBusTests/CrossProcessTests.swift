// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import ThemeSettings
import TestMachine

/// Values written by one process reach the streams of others: the examples, `dbus-send` and the client
/// library, on a private bus with the real broker.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct CrossProcessTests {
    /// A temporary directory for a store that outlives one broker process.
    static func storeDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-store-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test func aThemeSwitchedInOneProcessArrivesInAnother() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            // Given: a follower process that printed the current theme.
            let follower = try RunningProcess.start(try BuiltProduct.path("follow-theme"), [], environment: bus.environment)
            #expect(try await follower.nextLine() == "theme: light")

            // When: another process switches the theme.
            let switched = try await TestProcess.run(
                try BuiltProduct.path("switch-theme"), ["dark"], environment: bus.environment)
            #expect(switched.status == 0, "\(switched.stderr)")
            #expect(switched.stdout.hasPrefix("theme set to dark (serial "))

            // Then: the follower prints it.
            #expect(try await follower.nextLine() == "theme: dark")
            await follower.terminate()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aValueSetWithDbusSendArrivesInTheSwiftWatcher() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let follower = try RunningProcess.start(try BuiltProduct.path("follow-theme"), [], environment: bus.environment)
            #expect(try await follower.nextLine() == "theme: light")

            let script = Self.examples.appendingPathComponent("theme/set-theme-with-dbus-send.sh").path
            let result = try await TestProcess.run("/bin/sh", [script, "high-contrast"], environment: bus.environment)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("uint64"), "dbus-send prints the commit's serial: \(result.stdout)")

            #expect(try await follower.nextLine() == "theme: high-contrast")
            await follower.terminate()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aWatcherKeepsStreamingAcrossABrokerCrashAndRestart() async throws {
        let directory = try Self.storeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("settings.db").path
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus, storePath: store)
            let follower = try RunningProcess.start(try BuiltProduct.path("follow-theme"), [], environment: bus.environment)
            #expect(try await follower.nextLine() == "theme: light")
            let switchTheme = try BuiltProduct.path("switch-theme")
            #expect(try await TestProcess.run(switchTheme, ["dark"], environment: bus.environment).status == 0)
            #expect(try await follower.nextLine() == "theme: dark")

            for (round, theme) in ["high-contrast", "light", "dark"].enumerated() {
                // When: the broker dies without warning and a new one starts on the same store …
                #expect(await broker.kill() == 137, "round \(round)")
                broker = try await TestBroker.start(on: bus, storePath: store)
                // … and a third process changes the theme.
                let result = try await TestProcess.run(switchTheme, [theme], environment: bus.environment)
                #expect(result.status == 0, "\(result.stderr)")
                // Then: the follower, which never restarted, prints it.
                #expect(try await follower.nextLine() == "theme: \(theme)", "round \(round)")
            }
            await follower.terminate()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aWatcherReadsAgainWhatChangedWhileTheBrokerWasAway() async throws {
        let directory = try Self.storeDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("settings.db").path
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, storePath: store)
            let watcher = BusSettingsStore(bus: .address(bus.address))
            let key = SettingKey("/test/resync/mode", default: "first")
            let values = Collector(watcher.values(for: key))
            let changes = Collector(watcher.changes(for: key))
            #expect(try await values.next() == "first")
            #expect(await broker.stop() == 0)

            // Given: while no broker serves this bus, the store changes elsewhere (a broker on another bus),
            // so no signal can reach the watcher.
            try await withTestBus { elsewhere in
                let other = try await TestBroker.start(on: elsewhere, storePath: store)
                let writer = BusSettingsStore(bus: .address(elsewhere.address))
                try await writer.set(key, to: "changed meanwhile")
                await writer.close()
                #expect(await other.stop() == 0)
            }

            // When: the broker comes back on the watcher's bus.
            let back = try await TestBroker.start(on: bus, storePath: store)

            // Then: the watcher reads again and reports the change, with no origin (it was not a signal).
            #expect(try await values.next() == "changed meanwhile")
            let change = try await changes.next()
            #expect(change.value == "changed meanwhile" && change.origin == nil)
            values.stop()
            changes.stop()
            await watcher.close()
            #expect(await back.stop() == 0)
        }
    }

    @Test func eightProcessesIncrementingACounterCountExactly() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let counter = try BuiltProduct.path("launch-counter")
            // When: 8 processes each add 500, all at once.
            let results = try await withThrowingTaskGroup(of: TestProcess.Result.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await TestProcess.run(
                            counter, ["--times", "500"], environment: bus.environment, timeLimit: .seconds(150))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for result in results { #expect(result.status == 0, "\(result.stderr)") }

            // Then: the count is exact, read by a peer that is not ours.
            let read = try await TestProcess.run(
                "/usr/bin/gdbus",
                ["call", "--session", "--dest", "io.github.settingsbus.Settings1", "--object-path",
                 "/io/github/settingsbus/Settings1", "--method", "io.github.settingsbus.Settings1.Get",
                 "/io/github/settingsbus/examples/launch-count"],
                environment: bus.environment)
            #expect(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(<int64 4000>,)")
            #expect(await broker.stop() == 0)
        }
    }

    /// The repository's `examples/` directory.
    static let examples = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("examples")
}
