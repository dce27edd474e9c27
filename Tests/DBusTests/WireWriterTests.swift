// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBusTesting
import Testing
import TestMachine

/// A connection writes messages of two arguments or more in the wire format and has libdbus read them back
/// (`WireWriter`), instead of appending them through libdbus's iterator: both ways must give the same
/// message, header and body, byte for byte in the body.
@Suite(.sharingTheMachine) struct WireWriterTests {
    /// The message built both ways: libdbus reads back equal messages, with equal bodies.
    static func expectBuiltAlike(_ message: DBusMessage, _ comment: Comment? = nil) throws {
        let written = try message.marshalled(writingToWire: true)
        let appended = try message.marshalled(writingToWire: false)
        let fromWritten = try DBusMessage(marshalled: written)
        #expect(fromWritten == (try DBusMessage(marshalled: appended)), comment)
        #expect(DBusMessage.body(ofMarshalled: written) == DBusMessage.body(ofMarshalled: appended), comment)
        #expect(fromWritten.body == message.body, comment)
        #expect(fromWritten.noReplyExpected == message.noReplyExpected, comment)
        #expect(fromWritten.autoStart == message.autoStart, comment)
    }

    /// There are two writers because the Swift one is the cheaper way to send a message of several arguments
    /// and libdbus's iterator is the fallback and the reference (decision 0022): on the same seeded random
    /// bodies, they must agree.
    @Test func randomBodiesAreWrittenByTheFastWriterAsTheLibdbusWriterAppendsThem() throws {
        for seed in UInt64(1)...400 {
            var random = RandomValues(seed: seed)
            let body = (0..<Int.random(in: 0...5, using: &random.generator)).map { _ in random.value(depth: 4) }
            var call = DBusMessage.methodCall(
                destination: "org.example.Peer", path: "/org/example/object", interface: "org.example.Interface",
                member: "Call", body: body)
            call.serial = 11
            call.noReplyExpected = seed % 3 == 0
            call.autoStart = seed % 5 != 0
            try Self.expectBuiltAlike(call, "seed \(seed), call")
            var signal = DBusMessage.signal(path: "/a/b", interface: "a.b", member: "Changed", body: body)
            signal.serial = 12
            try Self.expectBuiltAlike(signal, "seed \(seed), signal")
            try Self.expectBuiltAlike(DBusMessage.methodReturn(to: call, body: body), "seed \(seed), return")
        }
    }

    /// Every kind of message and header field, and the messages SettingsBus sends most.
    @Test func everyKindOfMessageIsWrittenAsLibdbusBuildsIt() throws {
        let set = DBusMessage.methodCall(
            destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
            interface: "io.github.settingsbus.Settings1", member: "Set",
            body: [.string("/org/example/theme"), .variant(.string("dark"))])
        var bare = DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "Ping")
        bare.serial = 3
        var error = DBusMessage.error(replyingTo: bare, DBusError(.invalidArgs, "no"))
        error.body.append(.uint32(7))
        let changed = DBusMessage.signal(
            path: "/io/github/settingsbus/Settings1", interface: "io.github.settingsbus.Settings1", member: "Changed",
            body: [
                .string("/org/example/theme"),
                .dictionary(
                    key: .string, value: .variant,
                    [DBusDictEntry(key: .string("/org/example/theme"), value: .variant(.string("dark")))]),
                .array(.string, []), .uint64(42), .string(":1.7"),
            ])
        let empty = DBusMessage.signal(path: "/a", interface: "a.b", member: "Empty", destination: ":1.4")
        for message in [set, bare, error, changed, empty, DBusMessage.methodReturn(to: bare)] {
            try Self.expectBuiltAlike(message, "\(message.kind) \(message.member?.rawValue ?? "")")
        }
        let fromWritten = try DBusMessage(marshalled: try error.marshalled(writingToWire: true))
        #expect(fromWritten.errorName == .invalidArgs && fromWritten.replySerial == 3)
    }

    /// Arrays whose first element needs padding after the length, and empty ones, which still pad.
    @Test func arrayPaddingIsWrittenAsLibdbusWritesIt() throws {
        let bodies: [[DBusValue]] = [
            [.byte(1), .array(.uint64, [.uint64(1), .uint64(2)])],
            [.byte(1), .array(.uint64, [])],
            [.byte(1), .dictionary(key: .byte, value: .double, [])],
            [.int16(1), .array(.structure([.byte, .string]), [.structure([.byte(2), .string("x")])])],
            [.array(.byte, [.byte(1), .byte(2), .byte(3)]), .array(.byte, []), .boolean(true)],
            [.signature(try Signature("a{sv}(ii)")), .variant(.variant(.array(.int32, [.int32(-1)])))],
        ]
        for (index, body) in bodies.enumerated() {
            try Self.expectBuiltAlike(
                DBusMessage.signal(path: "/a", interface: "a.b", member: "C", body: body), "body \(index)")
        }
    }

    /// `marshalled()` writes the message's serial, or 1 for a message not given one (the wire has no 0).
    @Test func theSerialWrittenIsTheMessages() throws {
        var signal = DBusMessage.signal(path: "/a", interface: "a.b", member: "C", body: [.string("x"), .uint32(1)])
        #expect(try DBusMessage(marshalled: try signal.marshalled(writingToWire: true)).serial == 1)
        signal.serial = 77
        #expect(try DBusMessage(marshalled: try signal.marshalled(writingToWire: true)).serial == 77)
    }

    /// Written messages cross a real bus whole, each with its own serial from the sending connection.
    @Test(.timeLimit(.minutes(1))) func writtenMessagesCrossTheBusWithSerialsOfTheirOwn() async throws {
        try await withTestBus { bus in
            let sender = try await bus.connect()
            let receiver = try await bus.connect()
            let signals = try await receiver.signals(matching: MatchRule(interface: "org.example.Wire1"))
            let watchdog = closing(receiver)
            let bodies: [[DBusValue]] = [
                [.string("one"), .uint64(1)],
                [.string("two"), .dictionary(key: .string, value: .variant, [DBusDictEntry(key: .string("k"), value: .variant(.int32(2)))])],
                [.string("three")],
            ]
            for body in bodies {
                try sender.emitSignal(path: "/org/example/Wire", interface: "org.example.Wire1", member: "Hit", arguments: body)
            }
            var received: [DBusMessage] = []
            for try await signal in signals {
                received.append(signal)
                if received.count == bodies.count { break }
            }
            watchdog.cancel()
            #expect(received.map(\.body) == bodies)
            #expect(received.allSatisfy { $0.serial != 0 && $0.sender == sender.uniqueName })
            #expect(Set(received.map(\.serial)).count == bodies.count, "\(received.map(\.serial))")
            await sender.close()
            await receiver.close()
        }
    }
}
