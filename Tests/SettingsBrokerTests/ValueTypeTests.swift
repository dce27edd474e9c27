// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// Every D-Bus type the broker carries is set with `dbus-send` (basic types) or `gdbus` (every type) and read
/// back with `gdbus`, `dbus-send` and the binding, unchanged, also after a restart.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ValueTypeTests {
    /// How a case's value is sent: a `dbus-send` argument, or `gdbus` GVariant text.
    enum Setter: Sendable {
        case dbusSend(String)
        case gdbus(String)
    }

    /// One value: its type, how it is sent, and how it must come back.
    struct TypeCase: Sendable, CustomStringConvertible {
        /// The key's last segment.
        var name: String
        var signature: String
        var setter: Setter
        /// The value as `gdbus` prints the reply of `Get`, without the reply's tuple: `<int16 -300>`.
        var printed: String
        var value: DBusValue
        /// What `dbus-send --print-reply` prints for `Get` (white space squeezed), for values it prints on one line.
        var dbusSendShows: String? = nil

        var key: String { "/test/types/\(name)" }
        var description: String { "\(signature) \(name)" }
    }

    static func cases() throws -> [TypeCase] {
        [
            TypeCase(
                name: "byte", signature: "y", setter: .dbusSend("variant:byte:200"), printed: "<byte 0xc8>",
                value: .byte(200), dbusSendShows: "variant byte 200"),
            TypeCase(
                name: "boolean", signature: "b", setter: .dbusSend("variant:boolean:true"), printed: "<true>",
                value: .boolean(true), dbusSendShows: "variant boolean true"),
            TypeCase(
                name: "int16", signature: "n", setter: .dbusSend("variant:int16:-300"), printed: "<int16 -300>",
                value: .int16(-300), dbusSendShows: "variant int16 -300"),
            TypeCase(
                name: "uint16", signature: "q", setter: .dbusSend("variant:uint16:65535"), printed: "<uint16 65535>",
                value: .uint16(.max), dbusSendShows: "variant uint16 65535"),
            TypeCase(
                name: "int32", signature: "i", setter: .dbusSend("variant:int32:-2147483648"),
                printed: "<-2147483648>", value: .int32(.min), dbusSendShows: "variant int32 -2147483648"),
            TypeCase(
                name: "uint32", signature: "u", setter: .dbusSend("variant:uint32:4294967295"),
                printed: "<uint32 4294967295>", value: .uint32(.max), dbusSendShows: "variant uint32 4294967295"),
            TypeCase(
                name: "int64", signature: "x", setter: .dbusSend("variant:int64:-9223372036854775808"),
                printed: "<int64 -9223372036854775808>", value: .int64(.min),
                dbusSendShows: "variant int64 -9223372036854775808"),
            TypeCase(
                name: "uint64", signature: "t", setter: .dbusSend("variant:uint64:18446744073709551615"),
                printed: "<uint64 18446744073709551615>", value: .uint64(.max),
                dbusSendShows: "variant uint64 18446744073709551615"),
            TypeCase(
                name: "double", signature: "d", setter: .dbusSend("variant:double:-0.001"), printed: "<-0.001>",
                value: .double(-0.001), dbusSendShows: "variant double -0.001"),
            TypeCase(
                name: "string", signature: "s", setter: .dbusSend("variant:string:grüße, \"quoted\""),
                printed: "<'grüße, \"quoted\"'>", value: .string("grüße, \"quoted\""),
                dbusSendShows: "variant string \"grüße, \"quoted\"\""),
            TypeCase(
                name: "object-path", signature: "o", setter: .dbusSend("variant:objpath:/org/example/Path"),
                printed: "<objectpath '/org/example/Path'>", value: .objectPath("/org/example/Path"),
                dbusSendShows: "variant object path \"/org/example/Path\""),
            // dbus-send has no signature type.
            TypeCase(
                name: "signature", signature: "g", setter: .gdbus("<signature 'a{sv}'>"),
                printed: "<signature 'a{sv}'>", value: .signature(try Signature("a{sv}"))),
            TypeCase(
                name: "int16-from-gdbus", signature: "n", setter: .gdbus("<int16 7>"), printed: "<int16 7>",
                value: .int16(7), dbusSendShows: "variant int16 7"),
            TypeCase(
                name: "bytes", signature: "ay", setter: .gdbus("<[byte 0x00, 0xff]>"), printed: "<[byte 0x00, 0xff]>",
                value: .array(.byte, [.byte(0), .byte(255)])),
            TypeCase(
                name: "ints", signature: "ai", setter: .gdbus("<[1, -2, 3]>"), printed: "<[1, -2, 3]>",
                value: .array(.int32, [.int32(1), .int32(-2), .int32(3)])),
            TypeCase(
                name: "no-strings", signature: "as", setter: .gdbus("<@as []>"), printed: "<@as []>",
                value: .array(.string, [])),
            TypeCase(
                name: "matrix", signature: "aai", setter: .gdbus("<[[1, 2], [3]]>"), printed: "<[[1, 2], [3]]>",
                value: .array(
                    .array(.int32), [.array(.int32, [.int32(1), .int32(2)]), .array(.int32, [.int32(3)])])),
            TypeCase(
                name: "record", signature: "a{sv}", setter: .gdbus("<{'a': <1>, 'b': <'x'>}>"),
                printed: "<{'a': <1>, 'b': <'x'>}>", value: .stringMap([("a", .int32(1)), ("b", .string("x"))])),
            TypeCase(
                name: "int64-keys", signature: "a{xao}", setter: .gdbus("<{int64 -1: [objectpath '/p']}>"),
                printed: "<{int64 -1: [objectpath '/p']}>",
                value: .dictionary(
                    key: .int64, value: .array(.objectPath),
                    [DBusDictEntry(key: .int64(-1), value: .array(.objectPath, [.objectPath("/p")]))])),
            TypeCase(
                name: "nested-dictionaries", signature: "a{sa{sv}}", setter: .gdbus("<{'outer': {'inner': <true>}}>"),
                printed: "<{'outer': {'inner': <true>}}>",
                value: .dictionary(
                    key: .string, value: .dictionary(key: .string, value: .variant),
                    [DBusDictEntry(key: .string("outer"), value: .stringMap([("inner", .boolean(true))]))])),
            TypeCase(
                name: "structure", signature: "(ybsod)", setter: .gdbus("<(byte 0x01, true, 'x', objectpath '/a', 2.5)>"),
                printed: "<(byte 0x01, true, 'x', objectpath '/a', 2.5)>",
                value: .structure([.byte(1), .boolean(true), .string("x"), .objectPath("/a"), .double(2.5)])),
            TypeCase(
                name: "pairs", signature: "a(is)", setter: .gdbus("<[(1, 'a'), (2, 'b')]>"),
                printed: "<[(1, 'a'), (2, 'b')]>",
                value: .array(
                    .structure([.int32, .string]),
                    [.structure([.int32(1), .string("a")]), .structure([.int32(2), .string("b")])])),
            TypeCase(
                name: "nested-structure", signature: "(i(aba{sv}))",
                setter: .gdbus("<(1, ([true], {'k': <(uint16 3,)>}))>"),
                printed: "<(1, ([true], {'k': <(uint16 3,)>}))>",
                value: .structure([
                    .int32(1),
                    .structure([
                        .array(.boolean, [.boolean(true)]), .stringMap([("k", .structure([.uint16(3)]))]),
                    ]),
                ])),
            TypeCase(
                name: "nested-variants", signature: "v", setter: .gdbus("<<<int64 5>>>"), printed: "<<<int64 5>>>",
                value: .variant(.variant(.int64(5)))),
            TypeCase(
                name: "variants", signature: "av", setter: .gdbus("<[<1>, <'s'>]>"), printed: "<[<1>, <'s'>]>",
                value: .array(.variant, [.variant(.int32(1)), .variant(.string("s"))])),
        ]
    }

    @Test func everyTypeIsSetAndReadBackUnchanged() async throws {
        let cases = try Self.cases()
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()

            for type in cases {
                #expect(type.value.type.signatureText == type.signature, "the table's \(type) is inconsistent")
                // When: the value is set by a tool.
                let set: TestProcess.Result
                switch type.setter {
                case .dbusSend(let argument):
                    set = try await Peers.dbusSend(bus, "Set", ["string:\(type.key)", argument])
                case .gdbus(let text):
                    set = try await Peers.gdbus(bus, "Set", [type.key, text])
                }
                #expect(set.status == 0, "\(type): \(set.stderr)")

                // Then: every reader gets it back with its type.
                let printed = try await Peers.gdbus(bus, "Get", [type.key])
                #expect(printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(\(type.printed),)", "\(type)")
                #expect(try await connection.settings("Get", [.string(type.key)]) == [.variant(type.value)], "\(type)")
                if let shown = type.dbusSendShows {
                    let read = try await Peers.dbusSend(bus, "Get", ["string:\(type.key)"])
                    #expect(Peers.squeezed(read).hasSuffix(shown), "\(type): \(read.stdout) \(read.stderr)")
                }
                let described = try await connection.settings("Describe", [.string(type.key)])
                #expect(described.first?["signature"] == .string(type.signature), "\(type): \(described)")
            }

            // And: the store gives every value back with its type after a restart.
            let before = try await connection.settings("ReadTree", [.string("/test/types/")])
            #expect(before.first?.entries?.count == cases.count, "\(before)")
            let restarted = try await broker.restart()
            broker = restarted.broker
            #expect(restarted.exitStatus == 0)
            #expect(try await connection.settings("ReadTree", [.string("/test/types/")]) == before)

            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
