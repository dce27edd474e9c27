// SPDX-License-Identifier: Apache-2.0

import DBus
import Testing
import TestMachine

/// `DBusMessage(marshalled:)` and `marshalled()`, which the dbus-value fuzz check drives with arbitrary bytes.
@Suite(.sharingTheMachine) struct WireFormatTests {
    @Test func aMessageMarshalsAndReadsBackTheSame() throws {
        var call = DBusMessage.methodCall(
            destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
            interface: "io.github.settingsbus.Settings1", member: "Set")
        call.body = [
            .string("/org/example/theme"),
            .variant(.dictionary(key: .string, value: .variant, [.init(key: .string("a"), value: .variant(.double(-0.0)))])),
        ]
        call.serial = 7
        let bytes = try call.marshalled()
        let read = try DBusMessage(marshalled: bytes)
        #expect(read.kind == .methodCall)
        #expect(read.serial == 7)
        #expect(read.member == call.member)
        #expect(read.destination == call.destination)
        #expect(read.body == call.body)
    }

    @Test(arguments: [
        ([UInt8](), "a header alone is 16"),
        (Array("l\u{1}\0\u{1}".utf8) + [UInt8](repeating: 0, count: 8), "a header alone is 16"),
        ([UInt8](repeating: 0xff, count: 32), "do not start with a valid D-Bus message header"),
    ])
    func bytesThatAreNotAMessageAreRefusedWithAReason(_ bytes: [UInt8], reason: String) throws {
        let error = try #require(throws: DBusError.self) { try DBusMessage(marshalled: bytes) }
        #expect(error.name == .invalidArgs)
        #expect(error.message.contains(reason), "\(error.message)")
    }

    @Test func aTruncatedOrDamagedMessageIsRefused() throws {
        var call = DBusMessage.methodCall(
            destination: "a.b", path: "/a", interface: "a.b", member: "Get")
        call.body = [.string("/org/example/theme")]
        let bytes = try call.marshalled()

        let truncated = try #require(throws: DBusError.self) { try DBusMessage(marshalled: Array(bytes.dropLast())) }
        #expect(truncated.message.contains("bytes long, but there are"), "\(truncated.message)")

        // The string argument's bytes changed to invalid UTF-8: libdbus's validation refuses the message.
        var damaged = bytes
        let index = try #require(damaged.lastIndex(of: UInt8(ascii: "e")))
        damaged[index] = 0xff
        let invalid = try #require(throws: DBusError.self) { try DBusMessage(marshalled: damaged) }
        #expect(invalid.name == .invalidArgs)
        #expect(invalid.message.contains("not a valid D-Bus message"), "\(invalid.message)")
    }

    /// Found by fuzzing: libdbus passes on messages of a type the specification does not define, which were
    /// read as signals; the specification says to ignore them, and the connection drops what it cannot read.
    @Test func aMessageOfAnUnknownTypeIsRefused() throws {
        var signal = DBusMessage(kind: .signal)
        signal.path = "/a"
        signal.interface = "a.b"
        signal.member = "Changed"
        var bytes = try signal.marshalled()
        bytes[1] = 0x30
        let error = try #require(throws: DBusError.self) { try DBusMessage(marshalled: bytes) }
        #expect(error.message.contains("unknown type 48"), "\(error.message)")
    }
}
