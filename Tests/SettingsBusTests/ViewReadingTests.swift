// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBus
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// A Swift app reads keys it does not watch from the view the broker publishes (decision 0037): no bus message,
/// so with the broker stopped as with it running; its own writes and those of other processes are read at once
/// after they are answered; a secret key, keys of several directories, a view of another bus or one that cannot be
/// trusted go to the bus.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ViewReadingTests {
    static func set(_ store: BusSettingsStore, _ values: [(SettingPath, DBusValue)]) async throws {
        var transaction = SettingsTransaction()
        for (key, value) in values { transaction.set(key, to: value) }
        try await store.commit(transaction)
    }

    @Test func keysAnAppDoesNotWatchAreReadFromTheViewWithTheBrokerRunningOrStopped() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let folder = broker.viewFolder
            let (theme, size, font, token, unset) = (
                try SettingPath("/app/ui/theme"), try SettingPath("/app/ui/size"), try SettingPath("/app/ui/font"),
                try SettingPath("/app/ui/token"), try SettingPath("/app/ui/unset")
            )
            let other = BusSettingsStore(bus: .address(bus.address))
            try await other.register([
                font: SettingSchema(defaultValue: .string("Sans")),
                token: SettingSchema(defaultValue: .string(""), isSecret: true),
            ])
            try await Self.set(other, [(theme, .string("dark")), (size, .int32(3)), (token, .string("s3cret"))])
            try await broker.waitForTheView()

            let store = BusSettingsStore(bus: .address(bus.address), timeout: .seconds(2), viewFolder: folder)
            let read = try await store.read([theme, size, font, unset])
            #expect(read.values == [theme: .string("dark"), size: .int32(3), font: .string("Sans")])
            // Its own write, and another process's, are read as soon as they are answered.
            try await Self.set(store, [(theme, .string("light"))])
            #expect(try await store.read([theme]).values[theme] == .string("light"))
            try await Self.set(other, [(size, .int32(4))])
            #expect(try await store.read([size]).values[size] == .int32(4))
            // A secret key is asked of the bus.
            #expect(try await store.read([token]).values[token] == .string("s3cret"))

            // With the broker stopped, the view still answers; the bus does not (the store gives up after 2 s).
            try await broker.pause()
            let stopped = try await store.read([theme, size, font])
            #expect(stopped.values == [theme: .string("light"), size: .int32(4), font: .string("Sans")])
            await #expect(throws: SettingsError.self) { _ = try await store.read([token]) }
            #expect(kill(broker.pid, SIGCONT) == 0)

            // Keys of two directories are read from the bus, in one GetMany.
            let elsewhere = try SettingPath("/app/other/flag")
            try await Self.set(other, [(elsewhere, .boolean(true))])
            #expect(try await store.read([theme, elsewhere]).values == [theme: .string("light"), elsewhere: .boolean(true)])
            await store.close()
            await other.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A view file another process of the user wrote whole is read as it is (so the view is what is read); one of
    /// a broker on another bus, or garbage, is not: the broker's value is read instead.
    @Test func aViewOfAnotherBusOrThatCannotBeTrustedIsLeftForTheBus() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let folder = broker.viewFolder
            let theme = try SettingPath("/app/ui/theme")
            let other = BusSettingsStore(bus: .address(bus.address))
            try await Self.set(other, [(theme, .string("dark"))])
            try await broker.waitForTheView()
            let file = folder + "/" + View1.fileName(of: "/app/ui/")
            let forged = DBusMessage.signal(
                path: "/io/github/settingsbus/View1", interface: "io.github.settingsbus.View1", member: "Directory",
                body: [
                    .uint64(1), .string("/app/ui/"),
                    .dictionary(key: .string, value: .variant, [DBusDictEntry(key: .string(theme.rawValue), value: .variant(.string("from the file")))]),
                    .dictionary(key: .string, value: .variant, []), .array(.string, []),
                    .dictionary(key: .string, value: .variant, []), .array(.string, []),
                ])
            try Data(try forged.marshalled()).write(to: URL(fileURLWithPath: file))
            let store = BusSettingsStore(bus: .address(bus.address), viewFolder: folder)
            #expect(try await store.read([theme]).values[theme] == .string("from the file"))

            let complete = folder + "/complete"
            let completeBytes = try Data(contentsOf: URL(fileURLWithPath: complete))
            let anotherBus = View1.Complete(
                serial: 1, store: broker.storePath, bus: String(repeating: "0", count: 32), socket: "0:0"
            ).message
            for (damage, write) in [
                ("the view of a broker on another bus", { try Data(try anotherBus.marshalled()).write(to: URL(fileURLWithPath: complete)) }),
                ("a directory's file of garbage", {
                    try completeBytes.write(to: URL(fileURLWithPath: complete))
                    try Data(repeating: 0x6c, count: 64).write(to: URL(fileURLWithPath: file))
                }),
            ] as [(String, () throws -> Void)] {
                try write()
                let fresh = BusSettingsStore(bus: .address(bus.address), viewFolder: folder)
                #expect(try await fresh.read([theme]).values[theme] == .string("dark"), "\(damage)")
                await fresh.close()
            }
            await store.close()
            await other.close()
            #expect(await broker.stop() == 0)
        }
    }
}
