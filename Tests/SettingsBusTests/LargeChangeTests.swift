// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import SettingsModel
import TestMachine

/// A commit whose new values would not fit in one signal: the broker announces it without values, stays on
/// the bus, and watchers read what changed.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct LargeChangeTests {
    static let directory = try! SettingDirectory("/test/large/")
    /// Half of the keys are under `a/`, half under `b/`: a watcher of `a/` reads 18 MB, within one reply.
    static let watched = try! SettingDirectory("/test/large/a/")
    static let count = 40
    /// 40 defaults of 900 KiB: each within the 1 MiB value limit, 36 MB together.
    static let bigDefault = String(repeating: "d", count: 900 * 1024)

    @Test func aResetTooLargeForOneSignalIsAnnouncedWithoutValuesAndWatchersReadIt() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            func call(_ member: MemberName, _ arguments: [DBusValue]) async throws -> [DBusValue] {
                try await connection.call(
                    destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
                    interface: SettingsBusNames.interface, member: member, arguments: arguments, timeout: .seconds(60))
            }
            // Given: 40 keys with 900 KiB defaults, each with a small user value.
            for index in 0..<Self.count {
                let key = Self.directory.rawValue + (index % 2 == 0 ? "a/" : "b/") + "k\(index)"
                _ = try await call(
                    "Register",
                    [.string(key), .string("s"), .variant(.string(Self.bigDefault)),
                     .dictionary(key: .string, value: .variant, [])])
                _ = try await call("Set", [.string(key), .variant(.string("small"))])
            }
            // And: a peer that records Changed signals, a directory watcher and a key watcher.
            let signals = Collector(
                try await connection.signals(
                    matching: MatchRule(sender: SettingsBusNames.busName, interface: SettingsBusNames.interface, member: "Changed")))
            let watcher = BusSettingsStore(bus: .address(bus.address))
            let changes = Collector(watcher.changes(under: Self.watched))
            let key = SettingKey(try SettingPath(Self.directory.rawValue + "b/k7"), default: Self.bigDefault)
            let values = Collector(watcher.values(for: key))
            #expect(try await values.next() == "small")

            // When: the directory is reset (its Changed would carry 36 MB of defaults).
            let reply = try await call("Reset", [.string(Self.directory.rawValue)])
            guard case .uint64(let serial)? = reply.first else {
                Issue.record("Reset answered \(reply)")
                return
            }

            // Then: one Changed for the commit, naming the directory, with neither values nor removed keys.
            // (The last Set's own Changed leaves the broker after its reply, so it may reach the subscription.)
            var signal = try await signals.next(timeLimit: .seconds(60))
            while case .uint64(let earlier)? = signal.body.dropFirst(3).first, earlier < serial {
                signal = try await signals.next(timeLimit: .seconds(60))
            }
            #expect(signal.body.first == .string(Self.directory.rawValue))
            #expect(signal.body.count == 5)
            if signal.body.count == 5 {
                // Compared by size: a failure must not print 36 MB.
                #expect(signal.body[1].approximateSize < 64, "the signal carries values")
                #expect(signal.body[2] == .array(.string, []))
                #expect(signal.body[3] == .uint64(serial))
            }
            // And: the watchers read what changed: every default under a/, and the key's default.
            let update = try await changes.next(timeLimit: .seconds(60))
            #expect(update.values.count == Self.count / 2)
            #expect(update.values.keys.allSatisfy { Self.watched.contains($0) })
            let allDefaults = update.values.values.allSatisfy { $0 == .string(Self.bigDefault) }
            #expect(allDefaults, "the directory watcher did not read the defaults")
            #expect(update.serial >= serial)
            let value = try await values.next(timeLimit: .seconds(60))
            let valueIsDefault = value == Self.bigDefault
            #expect(valueIsDefault, "the key watcher did not read the default")
            // And: the same broker still owns its name and answers.
            #expect(try await connection.nameOwner(of: SettingsBusNames.busName) == broker.uniqueName)
            let read = try await call("Get", [.string(Self.directory.rawValue + "a/k0")])
            let readIsDefault = read == [.variant(.string(Self.bigDefault))]
            #expect(readIsDefault, "Get did not return the default")

            values.stop()
            changes.stop()
            signals.stop()
            await watcher.close()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
