// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import Observation
import SettingsBus
import SettingsBusTesting
import Testing
import SettingsModel
import TestMachine

/// The bus-backed store against a stand-in broker whose signals the test controls, and against the real
/// broker for activation, reconnection and D-Bus tools.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct BusStoreTests {
    static let key: SettingPath = try! SettingPath("/test/stale/name")

    /// A stand-in for the broker: owns the broker's name, answers `GetMany` with `value` at `serial`, and
    /// emits whatever `Changed` signals the test asks for.
    final class StandInBroker: Sendable {
        let connection: DBusConnection

        init(on bus: TestBus, value: String, serial: UInt64) async throws {
            connection = try await bus.connect()
            let getMany = DBusMethod(
                name: "GetMany", inputs: [.init("keys", .array(.string))],
                outputs: [.init("values", .dictionary(key: .string, value: .variant)), .init("serial", .uint64)]
            ) { _ in
                [
                    .dictionary(
                        key: .string, value: .variant,
                        [DBusDictEntry(key: .string(BusStoreTests.key.rawValue), value: .variant(.string(value)))]),
                    .uint64(serial),
                ]
            }
            try await connection.export(
                [DBusInterface(name: SettingsBusNames.interface, methods: [getMany])], at: SettingsBusNames.objectPath)
            #expect(try await connection.requestName(SettingsBusNames.busName) == .primaryOwner)
        }

        /// Emits `Changed(key, {key: value}, [], serial, origin)` from `connection`.
        static func emitChanged(on connection: DBusConnection, value: String, serial: UInt64) throws {
            try connection.emitSignal(
                path: SettingsBusNames.objectPath, interface: SettingsBusNames.interface, member: "Changed",
                arguments: [
                    .string(BusStoreTests.key.rawValue),
                    .dictionary(
                        key: .string, value: .variant,
                        [DBusDictEntry(key: .string(BusStoreTests.key.rawValue), value: .variant(.string(value)))]),
                    .array(.string, []), .uint64(serial), .string(connection.uniqueName?.rawValue ?? ""),
                ])
        }
    }

    @Test func staleAndForgedSignalsNeverReachAStreamOrTheLocalCopy() async throws {
        try await withTestBus { bus in
            let broker = try await StandInBroker(on: bus, value: "read", serial: 10)
            let forger = try await bus.connect()
            let store = BusSettingsStore(bus: .address(bus.address))
            let key = SettingKey(Self.key, default: "")
            let values = Collector(store.values(for: key))

            // Given: the stream read the value at serial 10.
            #expect(try await values.next() == "read")

            // When: the broker sends a change older than the read, another peer forges a newer one, and the
            // broker then sends a real change.
            try StandInBroker.emitChanged(on: broker.connection, value: "stale", serial: 9)
            try StandInBroker.emitChanged(on: forger, value: "forged", serial: 50)
            try StandInBroker.emitChanged(on: broker.connection, value: "fresh", serial: 11)

            // Then: only the real, newer change arrives, and the local copy holds it.
            #expect(try await values.next() == "fresh")
            #expect(store.cached(key) == "fresh")
            try StandInBroker.emitChanged(on: broker.connection, value: "later", serial: 12)
            #expect(try await values.next() == "later")

            values.stop()
            await store.close()
            await forger.close()
            await broker.connection.close()
        }
    }

    @Test func theFirstCallStartsTheBrokerByActivation() async throws {
        try await withTestBus { bus in
            let directory = try CrossProcessTests.storeDirectory()
            defer { try? FileManager.default.removeItem(at: directory) }
            try bus.installBrokerService(storePath: directory.appendingPathComponent("settings.db").path)
            let store = BusSettingsStore(bus: .address(bus.address))
            let key = SettingKey("/test/activation/greeting", default: "")

            try await store.set(key, to: "hello")
            #expect(try await store.get(key) == "hello")

            // The activated broker is a child of the bus daemon: end it by its pid.
            let connection = try await bus.connect()
            let reply = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetConnectionUnixProcessID", arguments: [.string(SettingsBusNames.busName.rawValue)])
            let pid = try #require(reply.first.flatMap { if case .uint32(let pid) = $0 { Int32(pid) } else { nil } })
            kill(pid, SIGTERM)
            await store.close()
            await connection.close()
        }
    }

    @Test func withoutABrokerTheErrorSaysHowToInstallOne() async throws {
        try await withTestBus { bus in
            let store = BusSettingsStore(bus: .address(bus.address))
            let error = await #expect(throws: SettingsError.self) {
                try await store.get(SettingKey("/test/missing/broker", default: 0))
            }
            #expect(error?.code == .brokerUnavailable)
            #expect(error?.message.contains("scripts/install") == true, "\(error?.message ?? "")")
            await store.close()
        }
    }

    @Test func aStoreMadeBeforeTheBrokerStartsWatchesOnceItAppears() async throws {
        try await withTestBus { bus in
            // Given: a store and a stream, made while no broker runs and none can be activated.
            let store = BusSettingsStore(bus: .address(bus.address))
            let key = SettingKey("/test/late/broker", default: "default")
            let values = Collector(store.values(for: key))

            // When: the broker starts.
            let broker = try await TestBroker.start(on: bus)

            // Then: the stream reads the value, and follows changes from then on.
            #expect(try await values.next() == "default")
            let writer = BusSettingsStore(bus: .address(bus.address))
            try await writer.set(key, to: "set")
            #expect(try await values.next() == "set")
            values.stop()
            await writer.close()
            await store.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test(arguments: RepresentationSamples.all)
    func everyRepresentationReadsAndWritesThroughGdbus(_ sample: RepresentationSamples.Sample) async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let store = BusSettingsStore(bus: .address(bus.address))
            let path = try SettingPath("/test/gdbus/\(sample.name)")
            let gdbus = ["call", "--session", "--dest", "io.github.settingsbus.Settings1", "--object-path",
                         "/io/github/settingsbus/Settings1", "--method"]

            // The client writes; gdbus reads the same value.
            var transaction = SettingsTransaction()
            transaction.set(path, to: sample.encoded)
            try await store.commit(transaction)
            let read = try await TestProcess.run(
                "/usr/bin/gdbus", gdbus + ["io.github.settingsbus.Settings1.Get", path.rawValue],
                environment: bus.environment)
            #expect(read.status == 0, "\(read.stderr)")
            let printed = try GVariantText.parse(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(printed == .structure([.variant(sample.encoded)]), "gdbus printed \(read.stdout)")

            // gdbus writes the value's text; the client reads it back as the Swift value.
            try await store.commit({ var reset = SettingsTransaction(); reset.reset(.key(path)); return reset }())
            let text = "<\(GVariantText.format(sample.encoded))>"
            let written = try await TestProcess.run(
                "/usr/bin/gdbus", gdbus + ["io.github.settingsbus.Settings1.Set", path.rawValue, text],
                environment: bus.environment)
            #expect(written.status == 0, "\(written.stderr)")
            let stored = try #require(try await store.read([path]).values[path])
            #expect(sample.matches(stored), "\(GVariantText.format(stored)) after gdbus wrote \(text)")

            await store.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func anObservedSettingFollowsChangesFromAnotherProcess() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let store = BusSettingsStore(bus: .address(bus.address))
            let key = SettingKey("/test/observed/size", default: 10)
            let observed = await ObservedSetting(key, in: store)
            #expect(await observed.value == 10)

            // When: another process sets the key; Then: observation reports the change and the new value.
            let changed = Mailbox<Int>()
            await Self.track(observed, into: changed)
            let result = try await TestProcess.run(
                "/usr/bin/dbus-send",
                ["--session", "--print-reply", "--dest=io.github.settingsbus.Settings1", "/io/github/settingsbus/Settings1",
                 "io.github.settingsbus.Settings1.Set", "string:/test/observed/size", "variant:int64:14"],
                environment: bus.environment)
            #expect(result.status == 0, "\(result.stderr)")
            var seen: [Int] = []
            while seen.last != 14, case .element(let value) = await changed.next(timeLimit: .seconds(20)) {
                seen.append(value)
            }
            #expect(seen.last == 14)
            #expect(await observed.value == 14)
            await store.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// Pushes the observed value into `mailbox` after every change that observation reports.
    @MainActor static func track(_ observed: ObservedSetting<Int>, into mailbox: Mailbox<Int>) {
        withObservationTracking { _ = observed.value } onChange: {
            Task { @MainActor in
                mailbox.push(observed.value)
                track(observed, into: mailbox)
            }
        }
    }
}
