// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The broker's D-Bus contract, exercised with peers that are not ours (`dbus-send`, `gdbus`, `dbus-monitor`)
/// on a private bus with the real `settings-broker`.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct BrokerContractTests {
    /// The `<interface name="io.github.settingsbus.Settings1">` element of an XML text, trimmed per line.
    static func interfaceElement(_ xml: String) -> [String] {
        let lines = xml.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let start = lines.firstIndex(of: "<interface name=\"io.github.settingsbus.Settings1\">") else { return [] }
        guard let end = lines[start...].firstIndex(of: "</interface>") else { return [] }
        return Array(lines[start...end]).filter { !$0.isEmpty && !$0.hasPrefix("<!--") }
    }

    @Test func theInterfaceXMLIsWhatTheBrokerIntrospects() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            let reply = try await connection.call(
                destination: TestBroker.busName, path: "/io/github/settingsbus/Settings1",
                interface: "org.freedesktop.DBus.Introspectable", member: "Introspect")
            guard case .string(let introspected)? = reply.first else {
                throw PeerFailure("Introspect returned \(reply)")
            }
            let contract = try String(
                contentsOf: Peers.repository.appendingPathComponent("dbus/io.github.settingsbus.Settings1.xml"),
                encoding: .utf8)
            let expected = Self.interfaceElement(contract)
            #expect(expected.count > 50, "the contract's interface element was not found")
            #expect(Self.interfaceElement(introspected) == expected)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// The shipped XML is well-formed for real XML parsers (a `--` inside its comment once made every one of
    /// them refuse it): libxml2's `xmllint`, python3's expat, and `gdbus-codegen`, which generates code from it.
    @Test func theInterfaceXMLIsWellFormedForRealParsers() async throws {
        let file = Peers.repository.appendingPathComponent("dbus/io.github.settingsbus.Settings1.xml").path
        let parse = """
            import sys, xml.dom.minidom
            names = [m.getAttribute('name') for m in xml.dom.minidom.parse(sys.argv[1]).getElementsByTagName('method')]
            print(' '.join(names))
            """
        let python = try await TestProcess.run("/usr/bin/python3", ["-c", parse, file])
        #expect(python.status == 0, "python3's XML parser: \(python.stderr)")
        #expect(
            python.stdout.split(whereSeparator: \.isWhitespace).map(String.init)
                == Settings1.requests.map { $0.method.rawValue }, "the methods python3 read")
        for tool in ["/usr/bin/xmllint", "/usr/bin/gdbus-codegen"] {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "\(tool) is installed by scripts/prerequisites")
        }
        let lint = try await TestProcess.run("/usr/bin/xmllint", ["--noout", file])
        #expect(lint.status == 0, "xmllint: \(lint.stderr)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("codegen-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let codegen = try await TestProcess.run(
            "/usr/bin/gdbus-codegen",
            ["--interface-prefix", "io.github.settingsbus.", "--generate-c-code", folder.appendingPathComponent("settings").path, file])
        #expect(codegen.status == 0, "gdbus-codegen: \(codegen.stderr)")
        let header = (try? String(contentsOf: folder.appendingPathComponent("settings.h"), encoding: .utf8)) ?? ""
        #expect(header.contains("settings1_call_apply"), "gdbus-codegen wrote no proxy for Apply")
    }

    @Test func aRegisteredTypeRangeAndChoicesAreEnforcedAndTheValueKept() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Given: a key with a range and a key with choices, each with a value.
            let size = "/test/contract/size", theme = "/test/contract/theme"
            let registrations = [
                try await Peers.gdbus(bus, "Register", [size, "i", "<12>", "{'range': <(8, 72)>}"]),
                try await Peers.gdbus(bus, "Register", [theme, "s", "<'light'>", "{'choices': <['light', 'dark']>}"]),
                try await Peers.dbusSend(bus, "Set", ["string:\(size)", "variant:int32:14"]),
                try await Peers.dbusSend(bus, "Set", ["string:\(theme)", "variant:string:dark"]),
            ]
            for result in registrations { #expect(result.status == 0, "\(result.stderr)") }
            let serial = try await connection.brokerSerial()

            // When: writes of the wrong type, out of the range, or not among the choices.
            let refused: [(arguments: [String], error: String)] = [
                (["Set", "string:\(size)", "variant:string:huge"], "TypeMismatch"),
                (["Set", "string:\(size)", "variant:int64:14"], "TypeMismatch"),  // the same number, another type
                (["Set", "string:\(size)", "variant:uint32:14"], "TypeMismatch"),
                (["Set", "string:\(size)", "variant:int32:100"], "OutOfRange"),
                (["Set", "string:\(size)", "variant:int32:7"], "OutOfRange"),
                (["SetFromString", "string:\(size)", "string:'huge'"], "TypeMismatch"),
                (["SetFromString", "string:\(size)", "string:73"], "OutOfRange"),
                (["Set", "string:\(theme)", "variant:string:blue"], "OutOfRange"),
                (["Set", "string:\(theme)", "variant:int32:1"], "TypeMismatch"),
                (["SetFromString", "string:\(theme)", "string:'Dark'"], "OutOfRange"),
            ]
            for (arguments, error) in refused {
                let result = try await Peers.dbusSend(bus, arguments[0], Array(arguments.dropFirst()))
                let reported = ReportedError(result)
                #expect(result.status != 0)
                #expect(reported?.name == "io.github.settingsbus.Settings1.Error.\(error)", "\(arguments): \(result.stderr)")
                #expect(reported?.message.contains("/test/contract/") == true, "the message names the key: \(result.stderr)")
            }

            // Then: the values are unchanged and nothing was committed.
            #expect(try await Peers.gdbus(bus, "Get", [size]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(<14>,)")
            #expect(try await Peers.gdbus(bus, "Get", [theme]).stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(<'dark'>,)")
            #expect(try await connection.brokerSerial() == serial)
            // And: the bounds and every choice are accepted.
            for value in ["int32:8", "int32:72"] {
                #expect(try await Peers.dbusSend(bus, "Set", ["string:\(size)", "variant:\(value)"]).status == 0)
            }
            #expect(try await Peers.dbusSend(bus, "Set", ["string:\(theme)", "variant:string:light"]).status == 0)
            #expect(try await connection.settings("Get", [.string(theme)]) == [.variant(.string("light"))])
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func setFromStringStoresArraysAndDictionariesThatDbusSendCannotSend() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // A registered type guides the parsing: `[1, 2]` is `at` there, `ai` elsewhere.
            #expect(try await Peers.gdbus(bus, "Register", ["/test/text/ids", "at", "<@at []>", "{}"]).status == 0)
            #expect(try await Peers.gdbus(bus, "Register", ["/test/text/counts", "a{su}", "<@a{su} {}>", "{}"]).status == 0)
            let cases: [(key: String, text: String, printed: String, value: DBusValue)] = [
                ("/test/text/list", "['a', 'b c']", "<['a', 'b c']>", .array(.string, [.string("a"), .string("b c")])),
                ("/test/text/map", "{'x': <1>, 'y': <'two'>}", "<{'x': <1>, 'y': <'two'>}>",
                 .stringMap([("x", .int32(1)), ("y", .string("two"))])),
                ("/test/text/pairs", "@a(su) [('one', 1)]", "<[('one', uint32 1)]>",
                 .array(.structure([.string, .uint32]), [.structure([.string("one"), .uint32(1)])])),
                ("/test/text/empty", "@a{sv} {}", "<@a{sv} {}>", .stringMap([])),
                ("/test/text/nested", "{'a': [[1], []]}", "<{'a': [[1], []]}>",
                 .dictionary(
                    key: .string, value: .array(.array(.int32)),
                    [DBusDictEntry(
                        key: .string("a"),
                        value: .array(.array(.int32), [.array(.int32, [.int32(1)]), .array(.int32, [])]))])),
                ("/test/text/ids", "[1, 2]", "<[uint64 1, 2]>", .array(.uint64, [.uint64(1), .uint64(2)])),
                ("/test/text/counts", "{'x': 1}", "<{'x': uint32 1}>",
                 .dictionary(key: .string, value: .uint32, [DBusDictEntry(key: .string("x"), value: .uint32(1))])),
            ]
            for (key, text, printed, value) in cases {
                let set = try await Peers.dbusSend(bus, "SetFromString", ["string:\(key)", "string:\(text)"])
                #expect(set.status == 0, "\(key): \(set.stderr)")
                let read = try await Peers.gdbus(bus, "Get", [key])
                #expect(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(\(printed),)", "\(key)")
                #expect(try await connection.settings("Get", [.string(key)]) == [.variant(value)], "\(key)")
            }
            let bad = try await Peers.dbusSend(bus, "SetFromString", ["string:/test/text/bad", "string:[1, "])
            #expect(ReportedError(bad)?.name == "io.github.settingsbus.Settings1.Error.InvalidValue", "\(bad.stderr)")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aRegistrationThatStopsAStoredValueBeingServedIsSignalled() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            let changes = Collector(
                try await connection.signals(
                    matching: MatchRule(
                        sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "Changed")))
            // Given: a key holding a string, watched by a subscriber that has seen its value.
            #expect(try await Peers.dbusSend(bus, "Set", ["string:/reg/size", "variant:string:big"]).status == 0)
            #expect(try await changes.next().body[1] == .stringMap([("/reg/size", .string("big"))]))

            // When: the key is registered as an int32.
            let register = try await Peers.gdbus(bus, "Register", ["/reg/size", "i", "<5>", "{}"])
            #expect(register.status == 0, "\(register.stderr)")

            // Then: Get returns the default, and the subscriber hears of it as of any change of the value.
            #expect(try await connection.settings("Get", [.string("/reg/size")]) == [.variant(.int32(5))])
            let signal = try await changes.next()
            #expect(signal.body[0] == .string("/reg/size"))
            #expect(signal.body[1] == .stringMap([("/reg/size", .int32(5))]))
            // The key reads its schema's default: no value of the user's is served.
            #expect(signal.body[2] == .array(.string, [.string("/reg/size")]))
            #expect(signal.body[3] == .uint64(try await connection.brokerSerial()))

            // And: registrations that leave Get's answer as it was, or give a key without a value a default,
            // send nothing: the first signal after them is a later write.
            #expect(try await Peers.dbusSend(bus, "Set", ["string:/reg/kept", "variant:int32:3"]).status == 0)
            #expect(try await changes.next().body.first == .string("/reg/kept"))
            #expect(try await Peers.gdbus(bus, "Register", ["/reg/kept", "i", "<0>", "{}"]).status == 0)
            #expect(try await Peers.gdbus(bus, "Register", ["/reg/theme", "s", "<'light'>", "{}"]).status == 0)
            #expect(try await Peers.dbusSend(bus, "Set", ["string:/reg/marker", "variant:int32:1"]).status == 0)
            #expect(try await changes.next().body.first == .string("/reg/marker"))
            changes.stop()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func changedCarriesItsArgumentsAndArg0pathFiltersInTheBus() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            // Given: two subscribers to /a/: a binding stream, and a dbus-monitor whose rule the daemon applies.
            let listener = try await bus.connect()
            var rule = MatchRule(
                sender: "io.github.settingsbus.Settings1", interface: "io.github.settingsbus.Settings1",
                member: "Changed")
            rule.argumentPaths[0] = "/a/"
            let signals = Collector(try await listener.signals(matching: rule))
            let monitor = try await Peers.monitor(
                bus, rules: ["type='signal',interface='io.github.settingsbus.Settings1',member='Changed',arg0path='/a/'"])
            try await withPeer(monitor) { monitor in
                let writer = try await bus.connect()

                // When: a change under /b/, then one under /a/.
                _ = try await writer.settings("Set", [.string("/b/other"), .variant(.int32(1))])
                let reply = try await writer.settings(
                    "Apply",
                    [
                        .stringMap([("/a/x", .variant(.string("one"))), ("/a/y/z", .boolean(true))]),
                        .array(.string, []), .stringMap([]),
                    ])

                // Then: the first signal either subscriber receives is the one under /a/, with its arguments.
                let signal = try await signals.next()
                #expect(signal.body.count == 5)
                #expect(signal.body[0] == .string("/a/"), "the path is the longest common directory")
                #expect(signal.body[1] == .stringMap([("/a/x", .variant(.string("one"))), ("/a/y/z", .boolean(true))]))
                #expect(signal.body[2] == .array(.string, []))
                #expect(reply.first.map { signal.body[3] == $0 } == true, "the signal's serial is the reply's")
                #expect(signal.body[4] == .string(writer.uniqueName?.rawValue ?? "-"), "the origin is the writer")
                let (_, skipped) = try await monitor.line(where: { $0.contains("member=Changed") })
                #expect(!skipped.contains { $0.contains("/b/") }, "\(skipped)")
                #expect(try await monitor.nextLine()?.trimmingCharacters(in: .whitespaces) == "string \"/a/\"")

                // And: a reset of one key names the key, and lists it as removed.
                let reset = try await writer.settings("Reset", [.string("/a/x")])
                let resetSignal = try await signals.next()
                #expect(resetSignal.body[0] == .string("/a/x"))
                #expect(resetSignal.body[1] == .stringMap([]))
                #expect(resetSignal.body[2] == .array(.string, [.string("/a/x")]))
                #expect(reset.first.map { resetSignal.body[3] == $0 } == true)
                await writer.close()
            }
            signals.stop()
            await listener.close()
            #expect(await broker.stop() == 0)
        }
    }
}
