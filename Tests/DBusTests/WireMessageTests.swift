// SPDX-License-Identifier: Apache-2.0

import DBus
import Testing
import TestMachine

/// A connection reads the messages it receives from their bytes (`WireMessage`), not through libdbus's
/// accessors and iterator: both readers must give the same messages, for every type, in either byte order.
@Suite(.sharingTheMachine) struct WireMessageTests {
    /// A marshalled message read both ways: the two must be equal.
    static func readBothWays(_ bytes: [UInt8]) throws -> (iterator: DBusMessage, wire: DBusMessage) {
        (try DBusMessage(marshalled: bytes), try DBusMessage(marshalled: bytes, readingFromWire: true))
    }

    /// There are two readers because the Swift one is the cheaper way to read a received message and libdbus's
    /// iterator is the fallback and the reference (decision 0022): on the same seeded random bodies, they must
    /// agree.
    @Test func randomBodiesAreReadByTheFastReaderAsTheLibdbusReaderReadsThem() throws {
        for seed in UInt64(1)...400 {
            var random = RandomValues(seed: seed)
            var signal = DBusMessage.signal(path: "/a/b", interface: "a.b", member: "Changed")
            signal.body = (0..<Int.random(in: 1...4, using: &random.generator)).map { _ in random.value(depth: 4) }
            signal.serial = 3
            let bytes = try signal.marshalled()
            let (byIterator, fromWire) = try Self.readBothWays(bytes)
            #expect(fromWire == byIterator, "seed \(seed)")
            // Equal messages marshal to equal bytes, which also tells -0.0 from 0.0.
            #expect(try fromWire.marshalled() == bytes, "seed \(seed)")
        }
    }

    @Test func theSettingsChangedSignalReadsTheSameBothWays() throws {
        var signal = DBusMessage.signal(
            path: "/io/github/settingsbus/Settings1", interface: "io.github.settingsbus.Settings1", member: "Changed")
        signal.body = [
            .string("/org/example/"),
            .dictionary(
                key: .string, value: .variant,
                [
                    DBusDictEntry(key: .string("/org/example/theme"), value: .variant(.string("dark"))),
                    DBusDictEntry(key: .string("/org/example/size"), value: .variant(.int32(12))),
                    DBusDictEntry(
                        key: .string("/org/example/font"),
                        value: .variant(.dictionary(key: .string, value: .variant, [
                            DBusDictEntry(key: .string("family"), value: .variant(.string("Sans"))),
                            DBusDictEntry(key: .string("weights"), value: .variant(.array(.uint16, [.uint16(400)]))),
                        ]))),
                ]),
            .array(.string, [.string("/org/example/gone")]),
            .uint64(42),
            .string(":1.7"),
        ]
        signal.serial = 12
        let (byIterator, fromWire) = try Self.readBothWays(try signal.marshalled())
        #expect(fromWire.body == signal.body)
        #expect(fromWire == byIterator)
        #expect(fromWire.serial == 12)
    }

    /// Every header field and flag a message can carry, and none.
    @Test func everyKindOfMessageReadsTheSameBothWays() throws {
        var call = DBusMessage.methodCall(
            destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
            interface: "io.github.settingsbus.Settings1", member: "Get", body: [.string("/a/b")])
        call.noReplyExpected = true
        call.autoStart = false
        call.serial = 5
        var bare = DBusMessage.methodCall(destination: nil, path: "/", interface: nil, member: "Ping")
        bare.serial = 6
        var reply = DBusMessage.methodReturn(to: call, body: [.variant(.int32(1))])
        reply.serial = 7
        var error = DBusMessage.error(replyingTo: call, DBusError(.invalidArgs, "no"))
        error.serial = 8
        var signal = DBusMessage.signal(path: "/a", interface: "a.b", member: "Ping")
        signal.serial = 9
        for message in [call, bare, reply, error, signal] {
            let (byIterator, fromWire) = try Self.readBothWays(try message.marshalled())
            #expect(fromWire == byIterator)
            #expect(fromWire.kind == message.kind)
        }
    }

    /// A header field the specification does not define is ignored by both readers (found by fuzzing: the
    /// wire reader gave up on it).
    @Test func anUnknownHeaderFieldIsIgnored() throws {
        var body = BigEndianWriter()
        body.string("a")
        let bytes = BigEndianWriter.signal(signature: "s", body: body.bytes, unknownField: true)
        let (byIterator, fromWire) = try Self.readBothWays(bytes)
        #expect(byIterator.body == [.string("a")])
        #expect(fromWire == byIterator)
    }

    /// A message in big-endian byte order, as a peer on such a machine sends it, written byte by byte.
    @Test func aBigEndianMessageReadsTheSameBothWays() throws {
        var body = BigEndianWriter()
        body.byte(0x7f)
        body.uint16(UInt16(bitPattern: -2))
        body.uint16(0xfffe)
        body.uint32(1)
        body.uint32(UInt32(bitPattern: -5))
        body.uint32(7)
        body.uint64(UInt64(bitPattern: -9))
        body.uint64(1 << 40)
        body.uint64((1.5).bitPattern)
        body.string("héllo")
        // av: two variants, an int32 and a string.
        body.align(4)
        let lengthAt = body.bytes.count
        body.uint32(0)
        let start = body.bytes.count
        body.signature("i")
        body.uint32(3)
        body.signature("s")
        body.string("x")
        body.patch(UInt32(body.bytes.count - start), at: lengthAt)
        let bytes = BigEndianWriter.signal(signature: "ynqbiuxtdsav", body: body.bytes)

        let expected: [DBusValue] = [
            .byte(0x7f), .int16(-2), .uint16(0xfffe), .boolean(true), .int32(-5), .uint32(7), .int64(-9),
            .uint64(1 << 40), .double(1.5), .string("héllo"), .array(.variant, [.variant(.int32(3)), .variant(.string("x"))]),
        ]
        let (byIterator, fromWire) = try Self.readBothWays(bytes)
        #expect(byIterator.body == expected)
        #expect(fromWire == byIterator)
        #expect(fromWire.path?.rawValue == "/a" && fromWire.member?.rawValue == "C" && fromWire.serial == 9)
        // The sender, which the bus daemon adds (a message marshalled here has none).
        #expect(fromWire.sender?.rawValue == ":1.9")
    }
}

/// Writes D-Bus wire format in big-endian byte order; alignment counts from the start of what it writes.
struct BigEndianWriter {
    var bytes: [UInt8] = []

    mutating func align(_ boundary: Int) {
        while bytes.count % boundary != 0 { bytes.append(0) }
    }

    mutating func byte(_ value: UInt8) { bytes.append(value) }

    mutating func uint16(_ value: UInt16) {
        align(2)
        bytes += [UInt8(value >> 8), UInt8(value & 0xff)]
    }

    mutating func uint32(_ value: UInt32) {
        align(4)
        bytes += (0..<4).reversed().map { UInt8((value >> (8 * $0)) & 0xff) }
    }

    mutating func uint64(_ value: UInt64) {
        align(8)
        bytes += (0..<8).reversed().map { UInt8((value >> (8 * UInt64($0))) & 0xff) }
    }

    mutating func string(_ text: String) {
        uint32(UInt32(text.utf8.count))
        bytes += Array(text.utf8) + [0]
    }

    mutating func signature(_ text: String) {
        byte(UInt8(text.utf8.count))
        bytes += Array(text.utf8) + [0]
    }

    mutating func patch(_ value: UInt32, at offset: Int) {
        for index in 0..<4 { bytes[offset + index] = UInt8((value >> (8 * (3 - index))) & 0xff) }
    }

    /// A whole signal, `/a` `a.b.C` from `:1.9`, with a body of `signature` whose bytes are `body` (written from offset 0,
    /// which the header keeps 8-aligned); with `unknownField`, also a header field of code 64, an `as`, which
    /// the specification says to ignore.
    static func signal(signature: String, body: [UInt8], unknownField: Bool = false) -> [UInt8] {
        var fields = BigEndianWriter()
        func field(_ code: UInt8, _ type: String, _ write: (inout BigEndianWriter) -> Void) {
            fields.align(8)
            fields.byte(code)
            fields.signature(type)
            write(&fields)
        }
        // The fields start at offset 16 of the message, which is 8-aligned: their alignment is the same here.
        field(1, "o") { $0.string("/a") }
        field(2, "s") { $0.string("a.b") }
        field(3, "s") { $0.string("C") }
        field(7, "s") { $0.string(":1.9") }
        if unknownField {
            field(64, "as") { writer in
                writer.uint32(0)
                let start = writer.bytes.count
                writer.string("x")
                writer.string("yz")
                writer.patch(UInt32(writer.bytes.count - start), at: start - 4)
            }
        }
        field(8, "g") { $0.signature(signature) }
        var message = BigEndianWriter()
        message.bytes = [UInt8(ascii: "B"), 4, 0, 1]
        message.uint32(UInt32(body.count))
        message.uint32(9)
        message.uint32(UInt32(fields.bytes.count))
        message.bytes += fields.bytes
        message.align(8)
        return message.bytes + body
    }
}
