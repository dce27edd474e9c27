// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// Malformed calls from `dbus-send`, `gdbus` and python3-dbus each get their documented error and a message,
/// and the broker stays up, in the same process, with its store and serial unchanged.
///
/// The table is the contract for bad input: each row names the error a client gets.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct BadInputTests {
    /// How a bad call is made.
    enum Call: Sendable {
        /// `dbus-send` with typed arguments (`string:/a`, `variant:int32:1`).
        case dbusSend(method: String, [String])
        /// `gdbus call` with GVariant text arguments.
        case gdbus(method: String, [String])
        /// `Tests/Peers/settings_call.py`: a signature and a Python expression for the argument tuple.
        case python(method: String, signature: String, String)
    }

    /// One bad call and the error name it must get.
    struct Case: Sendable, CustomStringConvertible {
        var what: String
        var call: Call
        var error: String

        var description: String {
            switch call {
            case .dbusSend(let method, _): "dbus-send \(method): \(what)"
            case .gdbus(let method, _): "gdbus \(method): \(what)"
            case .python(let method, _, _): "python3-dbus \(method): \(what)"
            }
        }
    }

    static let settingsError = "io.github.settingsbus.Settings1.Error."
    static let invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    static let unknownMethod = "org.freedesktop.DBus.Error.UnknownMethod"

    /// A key of 1,101 bytes: over the 1 KiB limit.
    static let longKey = "/" + String(repeating: "k", count: 1100)
    /// 34 nested arrays: D-Bus signatures allow 32.
    static let deepArrays = String(repeating: "[", count: 34) + "1" + String(repeating: "]", count: 34)
    /// 61 nested variants inside the argument's own: valid D-Bus, deeper than the 60 levels the broker stores.
    static let deepVariants = String(repeating: "<", count: 62) + "1" + String(repeating: ">", count: 62)

    static func dbusSend(_ what: String, _ method: String, _ arguments: [String], _ error: String) -> Case {
        Case(what: what, call: .dbusSend(method: method, arguments), error: error)
    }

    static func gdbus(_ what: String, _ method: String, _ arguments: [String], _ error: String) -> Case {
        Case(what: what, call: .gdbus(method: method, arguments), error: error)
    }

    static func python(_ what: String, _ method: String, _ signature: String, _ arguments: String, _ error: String) -> Case {
        Case(what: what, call: .python(method: method, signature: signature, arguments), error: error)
    }

    static let cases: [Case] = [
        // Wrong and missing arguments: refused before the broker looks at them.
        dbusSend("missing value", "Set", ["string:/a/b"], invalidArgs),
        dbusSend("key of type i", "Set", ["int32:5", "variant:int32:1"], invalidArgs),
        dbusSend("key of type o", "Get", ["objpath:/a/b"], invalidArgs),
        dbusSend("options a{ss}: dbus-send cannot send a{sv}", "Register",
                 ["string:/r/x", "string:i", "variant:int32:1", "dict:string:string:summary,x"], invalidArgs),
        gdbus("missing value", "Set", ["/a/b"], invalidArgs),
        gdbus("an extra argument", "Get", ["/a/b", "/c"], invalidArgs),
        python("key of type i", "Set", "iv", "(dbus.Int32(5), dbus.Int32(1))", invalidArgs),
        python("missing value", "Set", "s", "('/a/b',)", invalidArgs),
        python("set of type a{si}", "Apply", "a{si}asa{sv}", "({'/a': 1}, [], {})", invalidArgs),
        python("no arguments", "Register", "", "()", invalidArgs),

        // Invalid key paths.
        dbusSend("no leading slash", "Get", ["string:a/b"], settingsError + "InvalidKey"),
        dbusSend("empty segment", "Get", ["string:/a//b"], settingsError + "InvalidKey"),
        dbusSend("a directory, not a key", "Set", ["string:/a/", "variant:int32:1"], settingsError + "InvalidKey"),
        dbusSend("outside the segment alphabet", "Set", ["string:/é", "variant:int32:1"], settingsError + "InvalidKey"),
        dbusSend("empty key", "Get", ["string:"], settingsError + "InvalidKey"),
        dbusSend("a key, not a directory", "List", ["string:/a"], settingsError + "InvalidKey"),
        dbusSend("key over 1 KiB", "Set", ["string:\(longKey)", "variant:int32:1"], settingsError + "InvalidKey"),
        gdbus("no leading slash", "Get", ["a/b"], settingsError + "InvalidKey"),
        gdbus("empty segment in a list", "GetMany", ["['/ok', '/a//b']"], settingsError + "InvalidKey"),
        gdbus("a directory in Apply's set", "Apply", ["{'/a/': <1>}", "[]", "{}"], settingsError + "InvalidKey"),
        gdbus("outside the segment alphabet", "Reset", ["/é/"], settingsError + "InvalidKey"),
        gdbus("key over 1 KiB", "Describe", [longKey], settingsError + "InvalidKey"),
        python("empty segment", "Get", "s", "('/a//b',)", settingsError + "InvalidKey"),
        python("trailing slash", "Set", "sv", "('/a/', dbus.Int32(1))", settingsError + "InvalidKey"),
        python("outside the segment alphabet", "Get", "s", "('/\u{e9}',)", settingsError + "InvalidKey"),
        python("key over 1 KiB", "Set", "sv", "('/' + 'k' * 1100, dbus.Int32(1))", settingsError + "InvalidKey"),

        // Values too large or nested too deep.
        python("binary value over 1 MiB", "Set", "sv", "('/bad/big', blob(1024 * 1024 + 16))", settingsError + "TooLarge"),
        python("text value over 1 MiB", "SetFromString", "ss", "('/bad/big', \"'\" + 'x' * (1024 * 1024) + \"'\")",
               settingsError + "TooLarge"),
        python("62 levels of variants and structs", "Set", "sv", "('/bad/deep', nested(31))", settingsError + "TooLarge"),
        python("61 nested variants", "Set", "sv", "('/bad/deep', variants(62))", settingsError + "TooLarge"),
        gdbus("61 nested variants", "Set", ["/bad/deep", deepVariants], settingsError + "TooLarge"),
        dbusSend("34 nested arrays in text", "SetFromString", ["string:/bad/deep", "string:\(deepArrays)"],
                 settingsError + "TooLarge"),
        // Registered defaults and choices obey the same limits as values.
        python("default over 1 MiB", "Register", "ssva{sv}", "('/bad/reg', 'ay', blob(2 * 1024 * 1024), {})",
               settingsError + "TooLarge"),
        python("default of 61 nested variants", "Register", "ssva{sv}", "('/bad/reg', 'v', variants(62), {})",
               settingsError + "TooLarge"),
        python("choices over 1 MiB together", "Register", "ssva{sv}",
               "('/bad/reg', 's', dbus.String('a', variant_level=1), {'choices': dbus.Array(['a', 'x' * 600000, 'y' * 600000], signature='s', variant_level=1)})",
               settingsError + "TooLarge"),
        // 140 levels: the bus refuses the message itself and disconnects the sender; the broker never sees
        // it, which the checks after the table show.
        python("140 levels", "Set", "sv", "('/bad/deep', nested(70))", "org.freedesktop.DBus.Error.Disconnected"),

        // Invalid GVariant text.
        dbusSend("unterminated list", "SetFromString", ["string:/bad/text", "string:[1, "], settingsError + "InvalidValue"),
        dbusSend("unterminated string", "SetFromString", ["string:/bad/text", "string:'open"], settingsError + "InvalidValue"),
        dbusSend("maybe type", "SetFromString", ["string:/bad/text", "string:@mi 5"], settingsError + "InvalidValue"),
        dbusSend("empty array without a type", "SetFromString", ["string:/bad/text", "string:[]"],
                 settingsError + "InvalidValue"),
        dbusSend("trailing text", "SetFromString", ["string:/bad/text", "string:5 6"], settingsError + "InvalidValue"),
        dbusSend("integer too big for any type", "SetFromString", ["string:/bad/text", "string:99999999999999999999"],
                 settingsError + "OutOfRange"),
        // Elements without a common type are a type mismatch, as GLib's parser reports them.
        gdbus("mixed list", "SetFromString", ["/bad/text", "\"[1, 'a']\""], settingsError + "TypeMismatch"),
        python("unix fd handle", "SetFromString", "ss", "('/bad/text', 'handle 3')", settingsError + "InvalidValue"),

        // Unknown methods, and a property that cannot be written.
        dbusSend("unknown method", "NoSuchMethod", [], unknownMethod),
        gdbus("unknown method", "Delete", ["/a/b"], unknownMethod),
        python("unknown method", "Nope", "", "()", unknownMethod),
        python("a writable property", "org.freedesktop.DBus.Properties.Set", "ssv",
               "('io.github.settingsbus.Settings1', 'Serial', dbus.UInt64(0, variant_level=1))",
               "org.freedesktop.DBus.Error.PropertyReadOnly"),

        // Registrations: conflicting, or malformed.
        gdbus("another type", "Register", ["/kept/volume", "s", "<'x'>", "{}"], settingsError + "SchemaConflict"),
        gdbus("another range", "Register", ["/kept/volume", "i", "<50>", "{'range': <(0, 60)>}"],
              settingsError + "SchemaConflict"),
        python("a narrower range and another default", "Register", "ssva{sv}",
               "('/kept/volume', 'i', dbus.Int32(50, variant_level=1), {'range': dbus.Struct((dbus.Int32(10), dbus.Int32(100)), variant_level=1)})",
               settingsError + "SchemaConflict"),
        gdbus("default not of the type", "Register", ["/bad/reg", "q", "<5>", "{}"], settingsError + "TypeMismatch"),
        gdbus("malformed signature", "Register", ["/bad/reg", "'i('", "<5>", "{}"], settingsError + "InvalidValue"),
        gdbus("range with min above max", "Register", ["/bad/reg", "i", "<5>", "{'range': <(9, 1)>}"],
              settingsError + "InvalidValue"),
        gdbus("choices of another type", "Register", ["/bad/reg", "s", "<'a'>", "{'choices': <[1, 2]>}"],
              settingsError + "InvalidValue"),
        gdbus("unknown option", "Register", ["/bad/reg", "i", "<5>", "{'colour': <'red'>}"], settingsError + "InvalidValue"),
        python("range that is not a pair", "Register", "ssva{sv}",
               "('/bad/reg', 'i', dbus.Int32(5, variant_level=1), {'range': dbus.Int32(5, variant_level=1)})",
               settingsError + "InvalidValue"),

        // Writes the schema refuses, and a stale compare-and-set.
        dbusSend("wrong type", "Set", ["string:/kept/volume", "variant:string:loud"], settingsError + "TypeMismatch"),
        gdbus("out of range", "Set", ["/kept/volume", "<150>"], settingsError + "OutOfRange"),
        gdbus("one bad value in Apply", "Apply", ["{'/kept/other': <1>, '/kept/volume': <500>}", "[]", "{}"],
              settingsError + "OutOfRange"),
        gdbus("stale if-serial", "Apply", ["{'/kept/volume': <7>}", "[]", "{'if-serial': <uint64 0>}"],
              settingsError + "Conflict"),
        gdbus("if-serial of type i", "Apply", ["{'/kept/volume': <7>}", "[]", "{'if-serial': <1>}"],
              settingsError + "InvalidValue"),
        python("wrong type in text", "SetFromString", "ss", "('/kept/volume', \"'loud'\")", settingsError + "TypeMismatch"),
        dbusSend("a key without a value", "Get", ["string:/never/set"], settingsError + "UnknownKey"),
    ]

    /// Makes one bad call with its tool.
    static func run(_ call: Call, on bus: TestBus) async throws -> TestProcess.Result {
        switch call {
        case .dbusSend(let method, let arguments): try await Peers.dbusSend(bus, method, arguments)
        case .gdbus(let method, let arguments): try await Peers.gdbus(bus, method, arguments)
        case .python(let method, let signature, let arguments):
            try await Peers.python(bus, method, signature: signature, arguments)
        }
    }

    @Test func everyBadCallGetsItsErrorAndChangesNothing() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Given: a registered key with a value, and the store's serial and contents after it.
            _ = try await connection.settings(
                "Register",
                [.string("/kept/volume"), .string("i"), .variant(.int32(50)),
                 .stringMap([("range", .structure([.int32(0), .int32(100)]))])])
            _ = try await connection.settings("Set", [.string("/kept/volume"), .variant(.int32(42))])
            let serial = try await connection.brokerSerial()
            let tree = try await connection.settings("ReadTree", [.string("/")])

            // When: every bad call of the table.
            for bad in Self.cases {
                let result = try await Self.run(bad.call, on: bus)
                guard let reported = ReportedError(result) else {
                    Issue.record("\(bad) got no error: \(result.stdout) \(result.stderr)")
                    continue
                }
                // Then: its documented error, with a message.
                #expect(reported.name == bad.error, "\(bad): \(reported)")
                #expect(reported.message.count > 10, "\(bad): the message is empty: \(reported)")
            }

            // Then: the same broker process answers, and nothing was stored or committed.
            #expect(try await connection.nameOwner(of: TestBroker.busName) == broker.uniqueName)
            #expect(try await connection.processID(of: TestBroker.busName) == broker.pid)
            #expect(
                try await connection.call(
                    destination: TestBroker.busName, path: "/io/github/settingsbus/Settings1",
                    interface: "org.freedesktop.DBus.Peer", member: "Ping") == [])
            #expect(try await connection.settings("Get", [.string("/kept/volume")]) == [.variant(.int32(42))])
            #expect(try await connection.brokerSerial() == serial)
            #expect(try await connection.settings("ReadTree", [.string("/")]) == tree)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A text too long to be a value is refused by its size before it is parsed, with a message that says so,
    /// and the broker goes on serving.
    @Test func aHugeTextIsRefusedBeforeItIsParsed() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let result = try await Peers.python(
                bus, "SetFromString", signature: "ss", "('/bad/huge', \"'\" + 'x' * (20 * 1024 * 1024) + \"'\")")
            let reported = try #require(ReportedError(result), "\(result.stderr.prefix(500))")
            #expect(reported.name == Self.settingsError + "TooLarge")
            #expect(reported.message.contains("parses text of at most"), "\(reported.message.prefix(500))")
            let connection = try await bus.connect()
            #expect(try await connection.settings("Set", [.string("/bad/after"), .variant(.int32(1))]).count == 1)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

}
