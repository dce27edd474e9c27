// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import SettingsModel
import TestMachine

/// The trust model: secret values stay out of signals, and the system-bus policy lets only root write.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct SecurityTests {
    @Test func aSecretValueIsNeverBroadcastYetWatchersFollowIt() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let writer = BusSettingsStore(bus: .address(bus.address))
            let watcher = BusSettingsStore(bus: .address(bus.address))
            let token = SettingKey("/test/secret/token", default: "", isSecret: true)
            try await writer.register(token)

            // Given: a peer that records every Changed signal, and a watcher of the key.
            let listener = try await bus.connect()
            let signals = Collector(
                try await listener.signals(
                    matching: MatchRule(interface: SettingsBusNames.interface, member: "Changed")))
            let values = Collector(watcher.values(for: token))
            #expect(try await values.next() == "")

            // When: the secret is set.
            try await writer.set(token, to: "hunter2")

            // Then: the watcher has it (it read it with a call), and the signal carried the key but no value.
            #expect(try await values.next() == "hunter2")
            let signal = try await signals.next()
            #expect(signal.body.first == .string(token.path.rawValue))
            #expect(!GVariantText.format(.structure(signal.body)).contains("hunter2"))

            values.stop()
            signals.stop()
            await listener.close()
            await writer.close()
            await watcher.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A commit of several keys names their common directory, and a secret key in it is in neither `values`
    /// nor `removed`: a watcher of that key reads it again and follows it all the same.
    @Test func aSecretKeyChangedWithOthersReachesItsWatcher() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let writer = BusSettingsStore(bus: .address(bus.address))
            let watcher = BusSettingsStore(bus: .address(bus.address))
            let token = SettingKey("/test/secret/pair/token", default: "", isSecret: true)
            let user = SettingKey("/test/secret/pair/user", default: "")
            let other = SettingKey("/test/secret/pair/other", default: "")
            try await writer.register(token)
            let values = Collector(watcher.values(for: token))
            #expect(try await values.next() == "")

            // When: another key under the same directory changes alone, the token is read and not reported.
            try await writer.set(other, to: "x")
            // When: the token changes in one commit with another key.
            try await writer.transaction { (transaction: inout SettingsTransaction) throws(SettingsError) in
                try transaction.set(token, to: "hunter2")
                try transaction.set(user, to: "ada")
            }

            // Then: the watcher's next value is the token's new one.
            #expect(try await values.next() == "hunter2")
            #expect(watcher.cached(token) == "hunter2")
            values.stop()
            await writer.close()
            await watcher.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func onTheSystemBusOnlyRootWritesAndEveryoneReads() async throws {
        // The policy under test, on a bus that admits any user (as the system bus does).
        let bus = try await TestBus.startLikeTheSystemBus()
        let broker = try await TestBroker.start(on: bus)
        let root = BusSettingsStore(bus: .address(bus.address))
        let key = SettingKey("/test/policy/motd", default: "")
        try await root.set(key, to: "hello from root")

        func asNobody(_ arguments: [String]) async throws -> TestProcess.Result {
            try await TestProcess.run(
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/gdbus", "call", "--session",
                 "--dest", "io.github.settingsbus.Settings1", "--object-path", "/io/github/settingsbus/Settings1",
                 "--method"] + arguments,
                environment: bus.environment)
        }
        let read = try await asNobody(["io.github.settingsbus.Settings1.Get", key.path.rawValue])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout.contains("hello from root"))
        let write = try await asNobody(["io.github.settingsbus.Settings1.Set", key.path.rawValue, "<'defaced'>"])
        #expect(write.status != 0)
        #expect(write.stderr.contains("org.freedesktop.DBus.Error.AccessDenied"), "\(write.stderr)")
        #expect(try await root.get(key) == "hello from root")

        await root.close()
        #expect(await broker.stop() == 0)
        await bus.stop()
    }
}
