// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// What an app sees of the administrator's locks: a description stream that says the moment a key becomes
/// locked or unlocked, and writes refused with NotWritable.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct AdministratorLockTests {
    @Test func aKeyLockedWhileTheAppRunsIsReportedNotWritableAndRefusesWrites() async throws {
        let admin = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-admin-\(UUID())")
        try FileManager.default.createDirectory(
            at: admin.appendingPathComponent("locks.d"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: admin) }
        let theme = SettingKey("/org/example/app/theme", default: "light")
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.path])
            let settings = BusSettingsStore(bus: .address(bus.address))
            try await settings.register(theme)
            try await settings.set(theme, to: "dark")
            let descriptions = Collector(settings.descriptions(for: theme.path))
            defer { descriptions.stop() }
            #expect(try await descriptions.next().isWritable)

            // When: the administrator locks the key.
            let lockFile = admin.appendingPathComponent("locks.d/site")
            try "\(theme.path.rawValue)\n".write(to: lockFile, atomically: true, encoding: .utf8)
            // Then: the app hears at once that it is not writable, and why; its writes are refused.
            let locked: SettingDescription
            do {
                locked = try await descriptions.next(where: { !$0.isWritable })
            } catch {
                Issue.record("\(broker.log())")
                throw error
            }
            #expect(locked.lock == lockFile.path + ", line 1")
            #expect(locked.source == "schema")
            do throws(SettingsError) {
                try await settings.set(theme, to: "blue")
                Issue.record("a write of a locked key succeeded")
            } catch {
                #expect(error.code == .notWritable)
            }
            #expect(try await settings.get(theme) == "light")

            // When: the lock is lifted: writable again, and the user's value is back.
            try FileManager.default.removeItem(at: lockFile)
            let unlocked = try await descriptions.next(where: { $0.isWritable })
            #expect(unlocked.source == "user")
            #expect(try await settings.get(theme) == "dark")
            #expect(await broker.stop() == 0)
        }
    }
}
