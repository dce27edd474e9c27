// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `Apply` stores all of a changeset or none of it, and its compare-and-set refuses a stale serial; `Reset` of
/// a directory removes everything below it in one commit.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ApplyAndResetTests {
    /// Subscribes to every `Changed` signal of the broker.
    static func changes(on connection: DBusConnection) async throws -> Collector<DBusMessage> {
        Collector(
            try await connection.signals(
                matching: MatchRule(
                    sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "Changed")))
    }

    @Test func applyWithOneBadValueStoresNothingAndSignalsNothing() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Given: a key with a range and a value, and a subscriber to every change (watching from the start:
            // a write is answered before its Changed leaves, so a watch made after the last answer could still
            // see that write's Changed first).
            let changes = try await Self.changes(on: connection)
            _ = try await connection.settings(
                "Register",
                [.string("/ap/level"), .string("i"), .variant(.int32(5)), .stringMap([("range", .structure([.int32(0), .int32(10)]))])])
            _ = try await connection.settings("Set", [.string("/ap/level"), .variant(.int32(6))])
            _ = try await connection.settings("Set", [.string("/ap/old"), .variant(.string("kept"))])
            while try await changes.next().body.first != .string("/ap/old") {}
            let serial = try await connection.brokerSerial()

            // When: changesets in which one part is refused, sent with gdbus.
            let refused: [(arguments: [String], error: String)] = [
                (["{'/ap/new': <1>, '/ap/level': <50>, '/ap/other': <'x'>}", "['/ap/old']", "{}"], "OutOfRange"),
                (["{'/ap/new': <1>, '/ap/level': <'high'>}", "[]", "{}"], "TypeMismatch"),
                (["{'/ap/new': <1>, '/ap/bad//key': <2>}", "[]", "{}"], "InvalidKey"),
                (["{'/ap/new': <1>}", "['/ap/old', 'ap/']", "{}"], "InvalidKey"),
                (["{'/ap/new': <1>}", "[]", "{'if-serial': <uint64 \(serial)>, 'unknown': <1>}"], "InvalidValue"),
            ]
            for (arguments, error) in refused {
                let result = try await Peers.gdbus(bus, "Apply", arguments)
                #expect(ReportedError(result)?.name == "io.github.settingsbus.Settings1.Error.\(error)", "\(arguments): \(result.stderr)")
            }

            // Then: nothing of them is stored, the serial did not move, and the first signal is a later change.
            let read = try await connection.settings(
                "GetMany", [.array(.string, ["/ap/new", "/ap/level", "/ap/other", "/ap/old"].map(DBusValue.string))])
            #expect(read == [.stringMap([("/ap/level", .int32(6)), ("/ap/old", .string("kept"))]), .uint64(serial)])
            #expect(try await connection.brokerSerial() == serial)
            let marker = try await connection.settings("Set", [.string("/ap/marker"), .variant(.boolean(true))])
            let first = try await changes.next()
            #expect(first.body.first == .string("/ap/marker"), "a refused Apply sent a signal: \(first.body)")
            #expect(marker == [.uint64(serial + 1)])

            // And: the same changeset without the bad value commits as one, with one signal.
            let good = try await Peers.gdbus(
                bus, "Apply", ["{'/ap/new': <1>, '/ap/level': <9>, '/ap/other': <'x'>}", "['/ap/old']", "{}"])
            #expect(good.status == 0, "\(good.stderr)")
            let applied = try await changes.next()
            #expect(applied.body[0] == .string("/ap/"))
            #expect(applied.body[1] == .stringMap([("/ap/level", .int32(9)), ("/ap/new", .int32(1)), ("/ap/other", .string("x"))]))
            #expect(applied.body[2] == .array(.string, [.string("/ap/old")]))
            #expect(applied.body[3] == .uint64(serial + 2))
            #expect(good.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(uint64 \(serial + 2),)")
            changes.stop()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func applyIfSerialIsACompareAndSet() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            _ = try await connection.settings("Set", [.string("/cas/count"), .variant(.int32(1))])
            _ = try await connection.settings("Set", [.string("/cas/dir/a"), .variant(.int32(1))])

            // Given: a client that read the serial, and whose compare-and-set against it succeeds.
            let read = try await connection.brokerSerial()
            let first = try await Peers.gdbus(bus, "Apply", ["{'/cas/count': <2>}", "[]", "{'if-serial': <uint64 \(read)>}"])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(uint64 \(read + 1),)")

            // When: another writer changes the key, then the client tries again against the serial it knows.
            #expect(try await Peers.dbusSend(bus, "Set", ["string:/cas/count", "variant:int32:7"]).status == 0)
            let stale = try await Peers.gdbus(bus, "Apply", ["{'/cas/count': <3>}", "[]", "{'if-serial': <uint64 \(read + 1)>}"])

            // Then: Conflict, saying which key changed when; the other writer's value stays.
            let conflict = ReportedError(stale)
            #expect(conflict?.name == "io.github.settingsbus.Settings1.Error.Conflict", "\(stale.stderr)")
            #expect(conflict?.message.contains("/cas/count") == true, "\(stale.stderr)")
            #expect(try await connection.settings("Get", [.string("/cas/count")]) == [.variant(.int32(7))])
            // A reset of the key, or of a directory holding it, is guarded the same way.
            let staleReset = try await Peers.gdbus(bus, "Apply", ["@a{sv} {}", "['/cas/']", "{'if-serial': <uint64 \(read + 1)>}"])
            #expect(ReportedError(staleReset)?.name == "io.github.settingsbus.Settings1.Error.Conflict", "\(staleReset.stderr)")
            #expect(try await connection.settings("Get", [.string("/cas/dir/a")]) == [.variant(.int32(1))])
            // A key untouched since that serial can still be written against it.
            let untouched = try await Peers.gdbus(bus, "Apply", ["{'/cas/dir/a': <2>}", "[]", "{'if-serial': <uint64 \(read + 1)>}"])
            #expect(untouched.status == 0, "\(untouched.stderr)")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func resetOfADirectoryRemovesEverythingBelowItInOneCommit() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Watched from the start: a write is answered before its Changed leaves, so a watch made after the
            // last answer could still see that write's Changed first.
            let changes = try await Self.changes(on: connection)
            // Given: keys at several depths under /rr/, a registered key with a user value, and a neighbour
            // whose name starts the same way.
            _ = try await connection.settings(
                "Register", [.string("/rr/registered"), .string("i"), .variant(.int32(1)), .stringMap([])])
            for (key, value) in [("/rr/a", 1), ("/rr/b/c", 2), ("/rr/b/d/e", 3), ("/rr/registered", 4), ("/rrx/keep", 5)] {
                _ = try await connection.settings("Set", [.string(key), .variant(.int32(Int32(value)))])
            }
            while try await changes.next().body.first != .string("/rrx/keep") {}

            // When: dbus-send resets the directory.
            let reset = try await Peers.dbusSend(bus, "Reset", ["string:/rr/"])
            #expect(reset.status == 0, "\(reset.stderr)")

            // Then: one signal: the directory, the registered key back at its default, every key removed (the
            // registered one left with its schema's default, which it carries).
            let signal = try await changes.next()
            #expect(signal.body[0] == .string("/rr/"))
            #expect(signal.body[1] == .stringMap([("/rr/registered", .int32(1))]))
            #expect(
                signal.body[2] == .array(.string, ["/rr/a", "/rr/b/c", "/rr/b/d/e", "/rr/registered"].map(DBusValue.string)))
            let serialAfterReset = try await connection.brokerSerial()
            #expect(signal.body[3] == .uint64(serialAfterReset))
            #expect(Peers.squeezed(reset).hasSuffix("uint64 \(serialAfterReset)"), "\(reset.stdout)")
            #expect(
                try await connection.settings("ReadTree", [.string("/rr/")]).first
                    == .stringMap([("/rr/registered", .int32(1))]))
            #expect(try await connection.settings("List", [.string("/rr/")]) == [.array(.string, [.string("registered")])])
            #expect(try await connection.settings("Get", [.string("/rrx/keep")]) == [.variant(.int32(5))])
            let gone = try await Peers.gdbus(bus, "Get", ["/rr/b/d/e"])
            #expect(ReportedError(gone)?.name == "io.github.settingsbus.Settings1.Error.UnknownKey", "\(gone.stderr)")

            // And: resetting it again changes nothing: the same serial, and no signal before a later change.
            #expect(try await connection.settings("Reset", [.string("/rr/")]) == [.uint64(serialAfterReset)])
            _ = try await connection.settings("Set", [.string("/rrx/marker"), .variant(.int32(0))])
            #expect(try await changes.next().body.first == .string("/rrx/marker"))
            changes.stop()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
