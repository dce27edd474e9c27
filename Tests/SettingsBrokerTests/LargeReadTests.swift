// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// A read whose reply would be larger than a bus delivers is refused with `TooLarge`, instead of getting the
/// broker disconnected from the bus, and so from every client.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct LargeReadTests {
    /// The system bus's default limit on one message, 32 MiB; the test bus config allows far more.
    static let systemBusLimit = "<limit name=\"max_message_size\">33554432</limit>"

    @Test func aReadLargerThanOneMessageIsRefusedAndTheBrokerStays() async throws {
        let bus = try await TestBus.start(extraConfig: Self.systemBusLimit)
        do {
            try await Self.readLargerThanOneMessage(on: bus)
        } catch {
            await bus.stop()
            throw error
        }
        await bus.stop()
    }

    static func readLargerThanOneMessage(on bus: TestBus) async throws {
        let broker = try await TestBroker.start(on: bus)
        // Given: 33 values of 1,048,000 bytes under /big/ (34.6 MB), stored by python3-dbus in five commits.
        for batch in 0..<5 {
            let stored = try await Peers.python(
                bus, "Apply", signature: "a{sv}asa{sv}",
                "({'/big/b\(batch)/v%d' % i: dbus.String('x' * 1048000, variant_level=1) for i in range(\(batch == 4 ? 1 : 8))}, "
                    + "dbus.Array([], signature='s'), dbus.Dictionary({}, signature='sv'))")
            #expect(stored.stdout.hasPrefix("ok "), "\(stored.stdout) \(stored.stderr)")
        }
        let connection = try await bus.connect()
        let keys = (0..<33).map { DBusValue.string("/big/b\($0 / 8)/v\($0 % 8)") }

        // When: reads whose reply would be over 32 MiB.
        let tree = await #expect(throws: DBusError.self) { try await connection.settings("ReadTree", [.string("/")]) }
        let many = await #expect(throws: DBusError.self) {
            try await connection.settings("GetMany", [.array(.string, keys)])
        }

        // Then: TooLarge, saying what to do, from the same broker, which still answers smaller reads.
        for error in [tree, many] {
            #expect(
                error?.name.rawValue == "io.github.settingsbus.Settings1.Error.TooLarge", "\(String(describing: error))")
            #expect(error?.message.contains("read a smaller directory or fewer keys") == true)
        }
        #expect(try await connection.processID(of: TestBroker.busName) == broker.pid)
        let part = try await connection.settings("ReadTree", [.string("/big/b0/")])
        #expect(part.first?.entries?.count == 8)
        let some = try await connection.settings("GetMany", [.array(.string, Array(keys.prefix(20)))])
        #expect(some.first?.entries?.count == 20)
        await connection.close()
        #expect(await broker.stop() == 0)
    }
}
