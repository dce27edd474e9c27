// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBusTesting
import Testing
import TestMachine

/// Every D-Bus type survives a round trip through the bus: with gdbus as the peer, between two binding
/// connections, and for a few hundred random values.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ValueRoundTripTests {
    /// A value in GVariant text as `g_variant_print` writes it (with type annotations), and the value the
    /// binding must decode from it.
    struct Case: Sendable, CustomTestStringConvertible {
        var text: String
        var value: DBusValue
        var testDescription: String { text.count > 60 ? String(text.prefix(60)) + "…" : text }
    }

    static func nested(_ depth: Int, open: String, close: String, _ inner: String) -> String {
        String(repeating: open, count: depth) + inner + String(repeating: close, count: depth)
    }

    static func nestedValue(_ depth: Int, _ inner: DBusValue, _ wrap: (DBusValue) -> DBusValue) -> DBusValue {
        (0..<depth).reduce(inner) { value, _ in wrap(value) }
    }

    static let cases: [Case] = [
        Case(text: "byte 0x00", value: .byte(0)),
        Case(text: "byte 0xff", value: .byte(255)),
        Case(text: "true", value: .boolean(true)),
        Case(text: "false", value: .boolean(false)),
        Case(text: "int16 -32768", value: .int16(.min)),
        Case(text: "int16 32767", value: .int16(.max)),
        Case(text: "uint16 0", value: .uint16(0)),
        Case(text: "uint16 65535", value: .uint16(.max)),
        Case(text: "-2147483648", value: .int32(.min)),
        Case(text: "2147483647", value: .int32(.max)),
        Case(text: "uint32 4294967295", value: .uint32(.max)),
        Case(text: "int64 -9223372036854775808", value: .int64(.min)),
        Case(text: "int64 9223372036854775807", value: .int64(.max)),
        Case(text: "uint64 18446744073709551615", value: .uint64(.max)),
        Case(text: "1.5", value: .double(1.5)),
        Case(text: "-0.0", value: .double(-0.0)),
        Case(text: "1.0000000000000001e+300", value: .double(1e300)),
        Case(text: "3.1415899999999999", value: .double(3.14159)),
        Case(text: "''", value: .string("")),
        Case(text: "'héllo ✓ 🎉 中文'", value: .string("héllo ✓ 🎉 中文")),
        Case(text: #""quote ' and \\ backslash""#, value: .string(#"quote ' and \ backslash"#)),
        Case(text: #"'tab\tnl\n'"#, value: .string("tab\tnl\n")),
        Case(text: #"'\u0001\u001f'"#, value: .string("\u{1}\u{1f}")),
        Case(text: "objectpath '/'", value: .objectPath("/")),
        Case(text: "objectpath '/org/example/A_1'", value: .objectPath("/org/example/A_1")),
        Case(text: "signature ''", value: .signature(.empty)),
        Case(text: "signature 'a{sv}(ii)'", value: .signature(Signature(types: [
            .dictionary(key: .string, value: .variant), .structure([.int32, .int32]),
        ]))),
        Case(text: "<1>", value: .variant(.int32(1))),
        Case(text: "<<int16 3>>", value: .variant(.variant(.int16(3)))),
        Case(text: "@as []", value: .array(.string, [])),
        Case(text: "['a', 'b']", value: .array(.string, [.string("a"), .string("b")])),
        Case(text: "[@as [], ['x']]", value: .array(.array(.string), [.array(.string, []), .array(.string, [.string("x")])])),
        // A GVariant bytestring literal carries a terminating NUL, which gdbus prints back as b'abc'.
        Case(text: "b'abc'", value: .array(.byte, [.byte(97), .byte(98), .byte(99), .byte(0)])),
        Case(text: "[byte 0x00, 0x01, 0xff]", value: .array(.byte, [.byte(0), .byte(1), .byte(255)])),
        Case(text: "@ay []", value: .array(.byte, [])),
        Case(text: "[<1>, <'s'>, <[1, 2]>]", value: .array(.variant, [
            .variant(.int32(1)), .variant(.string("s")), .variant(.array(.int32, [.int32(1), .int32(2)])),
        ])),
        Case(text: "{'a': <1>, 'b': <'x'>}", value: .dictionary(key: .string, value: .variant, [
            .init(key: .string("a"), value: .variant(.int32(1))), .init(key: .string("b"), value: .variant(.string("x"))),
        ])),
        Case(text: "@a{sv} {}", value: .dictionary(key: .string, value: .variant, [])),
        Case(text: "{1: {'x': 'y'}, 2: {}}", value: .dictionary(key: .int32, value: .dictionary(key: .string, value: .string), [
            .init(key: .int32(1), value: .dictionary(key: .string, value: .string, [.init(key: .string("x"), value: .string("y"))])),
            .init(key: .int32(2), value: .dictionary(key: .string, value: .string, [])),
        ])),
        Case(text: "{objectpath '/a': signature 's'}", value: .dictionary(key: .objectPath, value: .signature, [
            .init(key: .objectPath("/a"), value: .signature(Signature(.string))),
        ])),
        Case(text: "{true: 1.0}", value: .dictionary(key: .boolean, value: .double, [.init(key: .boolean(true), value: .double(1))])),
        Case(text: "{'k': <{'n': <@ay []>}>}", value: .dictionary(key: .string, value: .variant, [
            .init(key: .string("k"), value: .variant(.dictionary(key: .string, value: .variant, [
                .init(key: .string("n"), value: .variant(.array(.byte, []))),
            ]))),
        ])),
        Case(text: "(1, 'a', (true, byte 0x02))", value: .structure([
            .int32(1), .string("a"), .structure([.boolean(true), .byte(2)]),
        ])),
        Case(text: "[(1, 'a'), (2, 'b')]", value: .array(.structure([.int32, .string]), [
            .structure([.int32(1), .string("a")]), .structure([.int32(2), .string("b")]),
        ])),
        Case(text: "((((1,),),),)", value: nestedValue(4, .int32(1)) { .structure([$0]) }),
        Case(
            text: nested(30, open: "[", close: "]", "int64 7"),
            value: nestedValue(30, .int64(7)) { .array($0.type, [$0]) }),
        Case(text: nested(30, open: "<", close: ">", "'deep'"), value: nestedValue(30, .string("deep")) { .variant($0) }),
        Case(
            text: String(repeating: "(", count: 30) + "uint16 1" + String(repeating: ",)", count: 30),
            value: nestedValue(30, .uint16(1)) { .structure([$0]) }),
    ]

    // MARK: - gdbus as the peer

    @Test(arguments: cases)
    func roundTripsWithGdbus(_ entry: Case) async throws {
        try await withTestBus { bus in
            let received = Recorder<DBusValue>()
            let server = try await bus.connect()
            try await server.export([Fixtures.echoInterface(received: received)], at: "/org/example/Echo")
            let result = try await Peers.gdbusCall(
                bus, destination: try #require(server.uniqueName).rawValue, path: "/org/example/Echo",
                method: "org.example.Echo1.Echo", ["<\(entry.text)>"])
            #expect(result.status == 0, "\(result.stderr)")
            // The handler decoded exactly the expected value …
            #expect(received.all == [.variant(entry.value)])
            // … and gdbus printed back what it sent.
            #expect(result.stdout == "(<\(entry.text)>,)\n")
            await server.close()
        }
    }

    // MARK: - Binding to binding

    /// Values of every type, including the deepest that D-Bus allows in a message.
    static var bindingValues: [DBusValue] {
        cases.map(\.value) + [
            .double(.infinity), .double(-.infinity), .double(.leastNonzeroMagnitude), .double(.greatestFiniteMagnitude),
            .string(String(repeating: "long ✓ ", count: 10_000)),
            .array(.byte, (0..<70_000).map { .byte(UInt8($0 % 256)) }),
            nestedValue(32, .byte(1)) { .array($0.type, [$0]) },
            nestedValue(32, .byte(1)) { .structure([$0]) },
            // 63 variants inside the Echo argument's own variant: 64 levels, the most a message may hold.
            nestedValue(63, .boolean(true)) { .variant($0) },
            nestedValue(31, .int32(1)) { .dictionary(key: .string, value: $0.type, [.init(key: .string("k"), value: $0)]) },
        ]
    }

    @Test func everyTypeRoundTripsBetweenTwoConnections() async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            let received = Recorder<DBusValue>()
            try await server.export([Fixtures.echoInterface(received: received)], at: "/org/example/Echo")
            let client = try await bus.connect()
            for value in Self.bindingValues {
                let reply = try await client.call(
                    destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo1",
                    member: "Echo", arguments: [.variant(value)])
                #expect(reply == [.variant(value)], "\(value.type)")
                #expect(received.last == .variant(value))
            }
            await client.close()
            await server.close()
        }
    }

    @Test func signalBodiesOfEveryTypeArriveUnchanged() async throws {
        try await withTestBus { bus in
            let sender = try await bus.connect()
            let receiver = try await bus.connect()
            let stream = try await receiver.signals(
                matching: MatchRule(sender: sender.uniqueName, interface: "org.example.Values1", member: "Value"))
            let values = Self.bindingValues
            for value in values {
                try sender.emitSignal(path: "/org/example/Values", interface: "org.example.Values1", member: "Value", arguments: [value, .uint32(1)])
            }
            let watchdog = closing(receiver)
            var iterator = stream.makeAsyncIterator()
            for value in values {
                let signal = try #require(await iterator.next())
                #expect(signal.body == [value, .uint32(1)], "\(value.type)")
            }
            watchdog.cancel()
            await sender.close()
            await receiver.close()
        }
    }

    @Test func tooDeepValueIsRefusedBeforeSendingAndTheConnectionSurvives() async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            try await server.export([Fixtures.echoInterface()], at: "/org/example/Echo")
            let client = try await bus.connect()
            let tooDeep = Self.nestedValue(64, .boolean(true)) { .variant($0) }
            let error = await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo1",
                    member: "Echo", arguments: [.variant(tooDeep)])
            }
            #expect(error?.name == .invalidArgs)
            let reply = try await client.call(
                destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo1",
                member: "Echo", arguments: [.variant(.string("still here"))])
            #expect(reply == [.variant(.string("still here"))])
            await client.close()
            await server.close()
        }
    }

    @Test(arguments: [UInt64(1), 0x5EED, 0xC0FFEE])
    func randomValuesRoundTrip(seed: UInt64) async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            try await server.export([Fixtures.echoInterface()], at: "/org/example/Echo")
            let client = try await bus.connect()
            var random = RandomValues(seed: seed)
            for index in 0..<150 {
                let value = random.value(depth: 6)
                try value.validate()
                let reply = try await client.call(
                    destination: server.uniqueName, path: "/org/example/Echo", interface: "org.example.Echo1",
                    member: "Echo", arguments: [.variant(value)])
                #expect(reply == [.variant(value)], "seed \(seed), value \(index): \(value)")
            }
            await client.close()
            await server.close()
        }
    }
}
