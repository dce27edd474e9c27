// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import SettingsBusTesting
import Testing
import TestMachine

/// An object exported through the binding, called by real peers: `dbus-send`, `gdbus` and python3-dbus.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ExportedObjectTests {
    /// A bus with the echo object exported at `/org/example/Echo` by its own connection.
    struct Served {
        let bus: TestBus
        let server: DBusConnection
        let destination: String
        let calls = Recorder<String>()
        let volume = Recorder<DBusValue>(initial: [.int32(5)])

        static let path = "/org/example/Echo"
    }

    func withServedEcho(_ body: (Served) async throws -> Void) async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            let destination = try #require(server.uniqueName).rawValue
            let served = Served(bus: bus, server: server, destination: destination)
            try await server.export(
                [Fixtures.echoInterface(volume: served.volume, calls: served.calls)], at: ObjectPath(Served.path))
            do {
                try await body(served)
            } catch {
                await server.close()
                throw error
            }
            await server.close()
        }
    }

    // MARK: - Calls

    @Test func dbusSendGetsReplies() async throws {
        try await withServedEcho { served in
            let concat = try await Peers.dbusSend(
                served.bus, destination: served.destination, path: Served.path, method: "org.example.Echo1.Concat",
                ["string:ab", "string:cd"])
            #expect(concat.status == 0, "\(concat.stderr)")
            #expect(concat.stdout.contains("string \"abcd\""), "\(concat.stdout)")
            let echo = try await Peers.dbusSend(
                served.bus, destination: served.destination, path: Served.path, method: "org.example.Echo1.Echo",
                ["variant:int32:-7"])
            #expect(echo.status == 0, "\(echo.stderr)")
            #expect(echo.stdout.range(of: #"variant\s+int32 -7"#, options: .regularExpression) != nil, "\(echo.stdout)")
            #expect(served.calls.all == ["Concat", "Echo"])
        }
    }

    @Test func gdbusGetsReplies() async throws {
        try await withServedEcho { served in
            let concat = try await Peers.gdbusCall(
                served.bus, destination: served.destination, path: Served.path, method: "org.example.Echo1.Concat",
                ["ab", "cd"])
            #expect(concat.status == 0, "\(concat.stderr)")
            #expect(concat.stdout == "('abcd',)\n")
            let echo = try await Peers.gdbusCall(
                served.bus, destination: served.destination, path: Served.path, method: "org.example.Echo1.Echo",
                ["<('x', [uint16 1, 2])>"])
            #expect(echo.stdout == "(<('x', [uint16 1, 2])>,)\n", "\(echo.stderr)")
        }
    }

    @Test func pythonGetsRepliesAndErrors() async throws {
        try await withServedEcho { served in
            let result = try await TestProcess.run(
                Peers.python, [Peers.script("call_object.py"), served.destination, Served.path],
                environment: served.bus.environment, timeLimit: .seconds(30))
            #expect(result.status == 0, "\(result.stderr)")
            let lines = result.stdout.split(separator: "\n").map(String.init)
            #expect(
                lines == [
                    "concat python",
                    "echo-int dbus.Int32(42, variant_level=1)",
                    "echo-string grüße",
                    "echo-dict [('a', 1), ('b', 2)]",
                    "fail error org.example.Echo1.Error.Broken: it broke on purpose",
                    "wrong-args error org.freedesktop.DBus.Error.InvalidArgs: "
                        + "Concat takes arguments of type 'ss', but the call carried 'is'",
                    "unknown-method error org.freedesktop.DBus.Error.UnknownMethod: "
                        + "interface org.example.Echo1 has no method Nope",
                    "echo-fd error org.freedesktop.DBus.Error.InvalidArgs: arguments of type 'h' are not supported",
                    "volume 5",
                ])
            // The call with the wrong argument types never reached its handler.
            #expect(served.calls.all == ["Concat", "Echo", "Echo", "Echo", "Fail"])
        }
    }

    // MARK: - Errors

    @Test func unknownObjectInterfaceAndMethodGetTheStandardErrors() async throws {
        try await withServedEcho { served in
            let cases: [(path: String, method: String, error: String)] = [
                ("/org/example/Nothing", "org.example.Echo1.Echo", "org.freedesktop.DBus.Error.UnknownObject"),
                (Served.path, "org.example.Other1.Echo", "org.freedesktop.DBus.Error.UnknownInterface"),
                (Served.path, "org.example.Echo1.Nope", "org.freedesktop.DBus.Error.UnknownMethod"),
            ]
            for (path, method, error) in cases {
                let sent = try await Peers.dbusSend(
                    served.bus, destination: served.destination, path: path, method: method, ["variant:int32:1"])
                #expect(sent.status != 0)
                #expect(sent.stderr.hasPrefix("Error \(error): "), "dbus-send \(path) \(method): \(sent.stderr)")
                let called = try await Peers.gdbusCall(
                    served.bus, destination: served.destination, path: path, method: method, ["<1>"])
                #expect(called.status != 0)
                #expect(called.stderr.contains("GDBus.Error:\(error): "), "gdbus \(path) \(method): \(called.stderr)")
            }
            #expect(served.calls.all.isEmpty)

            // An object that is no longer exported is unknown.
            await served.server.unexport(try ObjectPath(Served.path))
            let gone = try await Peers.dbusSend(
                served.bus, destination: served.destination, path: Served.path, method: "org.example.Echo1.Concat",
                ["string:a", "string:b"])
            #expect(gone.stderr.hasPrefix("Error org.freedesktop.DBus.Error.UnknownObject: "), "\(gone.stderr)")
            #expect(served.calls.all.isEmpty)
        }
    }

    @Test func wrongArgumentTypesAreInvalidArgsAndTheHandlerDoesNotRun() async throws {
        try await withServedEcho { served in
            let wrong: [(method: String, arguments: [String])] = [
                ("org.example.Echo1.Concat", ["int32:1", "string:b"]),
                ("org.example.Echo1.Concat", ["string:a"]),
                ("org.example.Echo1.Concat", ["string:a", "string:b", "string:c"]),
                ("org.example.Echo1.Echo", ["string:not-a-variant"]),
                ("org.example.Echo1.Fail", ["byte:1"]),
            ]
            for (method, arguments) in wrong {
                let sent = try await Peers.dbusSend(
                    served.bus, destination: served.destination, path: Served.path, method: method, arguments)
                #expect(sent.status != 0)
                #expect(
                    sent.stderr.hasPrefix("Error org.freedesktop.DBus.Error.InvalidArgs: "),
                    "\(method) \(arguments): \(sent.stderr)")
            }
            #expect(served.calls.all.isEmpty)
        }
    }

    @Test func handlerErrorReachesPeersWithItsNameAndMessage() async throws {
        try await withServedEcho { served in
            let sent = try await Peers.dbusSend(
                served.bus, destination: served.destination, path: Served.path, method: "org.example.Echo1.Fail")
            #expect(sent.status != 0)
            #expect(sent.stderr == "Error org.example.Echo1.Error.Broken: it broke on purpose\n")
            let called = try await Peers.gdbusCall(
                served.bus, destination: served.destination, path: Served.path, method: "org.example.Echo1.Fail")
            #expect(called.status != 0)
            #expect(called.stderr.contains("GDBus.Error:org.example.Echo1.Error.Broken: it broke on purpose"))
        }
    }

    // MARK: - Properties

    @Test func propertiesAreReadAndWrittenByGdbusAndDbusSend() async throws {
        try await withServedEcho { served in
            func gdbus(_ method: String, _ arguments: [String]) async throws -> TestProcess.Result {
                try await Peers.gdbusCall(
                    served.bus, destination: served.destination, path: Served.path,
                    method: "org.freedesktop.DBus.Properties.\(method)", arguments)
            }
            #expect(try await gdbus("Get", ["org.example.Echo1", "Volume"]).stdout == "(<5>,)\n")
            #expect(try await gdbus("GetAll", ["org.example.Echo1"]).stdout == "({'Version': <uint32 1>, 'Volume': <5>},)\n")
            #expect(try await gdbus("Set", ["org.example.Echo1", "Volume", "<7>"]).stdout == "()\n")
            #expect(try await gdbus("Get", ["org.example.Echo1", "Volume"]).stdout == "(<7>,)\n")

            let set = try await Peers.dbusSend(
                served.bus, destination: served.destination, path: Served.path,
                method: "org.freedesktop.DBus.Properties.Set", ["string:org.example.Echo1", "string:Volume", "variant:int32:9"])
            #expect(set.status == 0, "\(set.stderr)")
            let get = try await Peers.dbusSend(
                served.bus, destination: served.destination, path: Served.path,
                method: "org.freedesktop.DBus.Properties.Get", ["string:org.example.Echo1", "string:Volume"])
            #expect(get.stdout.range(of: #"variant\s+int32 9"#, options: .regularExpression) != nil, "\(get.stdout)")
            #expect(served.volume.all == [.int32(5), .int32(7), .int32(9)])

            let readOnly = try await gdbus("Set", ["org.example.Echo1", "Version", "<uint32 2>"])
            #expect(readOnly.stderr.contains("GDBus.Error:org.freedesktop.DBus.Error.PropertyReadOnly: "), "\(readOnly.stderr)")
            let wrongType = try await gdbus("Set", ["org.example.Echo1", "Volume", "<'loud'>"])
            #expect(wrongType.stderr.contains("GDBus.Error:org.freedesktop.DBus.Error.InvalidArgs: "), "\(wrongType.stderr)")
            let unknown = try await gdbus("Get", ["org.example.Echo1", "Colour"])
            #expect(unknown.stderr.contains("GDBus.Error:org.freedesktop.DBus.Error.UnknownProperty: "), "\(unknown.stderr)")
            let noInterface = try await gdbus("GetAll", ["org.example.Other1"])
            #expect(noInterface.stderr.contains("GDBus.Error:org.freedesktop.DBus.Error.UnknownInterface: "))
            #expect(served.volume.all == [.int32(5), .int32(7), .int32(9)])
        }
    }

    @Test func setEmitsPropertiesChangedToStreamsAndMonitors() async throws {
        try await withServedEcho { served in
            // Given a binding stream and a dbus-monitor, both watching PropertiesChanged of the object.
            let listener = try await served.bus.connect()
            let stream = try await listener.signals(
                matching: MatchRule(
                    interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
                    path: ObjectPath(Served.path)))
            let monitor = try await Peers.monitor(
                served.bus, rules: ["type='signal',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'"])
            let watchdog = closing(listener)

            // When gdbus sets the property.
            let set = try await Peers.gdbusCall(
                served.bus, destination: served.destination, path: Served.path,
                method: "org.freedesktop.DBus.Properties.Set", ["org.example.Echo1", "Volume", "<8>"])
            #expect(set.status == 0, "\(set.stderr)")

            // Then the stream receives the signal with the new value.
            var iterator = stream.makeAsyncIterator()
            let signal = try #require(await iterator.next())
            watchdog.cancel()
            #expect(signal.sender?.rawValue == served.destination)
            #expect(
                signal.body == [
                    .string("org.example.Echo1"),
                    .dictionary(key: .string, value: .variant, [.init(key: .string("Volume"), value: .variant(.int32(8)))]),
                    .array(.string, []),
                ])
            // And dbus-monitor prints it.
            try await monitor.line(where: { $0.contains("member=PropertiesChanged") && $0.contains("path=\(Served.path)") })
            try await monitor.line(where: { $0.contains("string \"org.example.Echo1\"") })
            try await monitor.line(where: { $0.contains("string \"Volume\"") })
            try await monitor.line(where: { $0.range(of: #"variant\s+int32 8"#, options: .regularExpression) != nil })
            await monitor.terminate()
            await listener.close()
        }
    }

    // MARK: - Standard interfaces

    @Test func peerPingAndGetMachineIdAreAnswered() async throws {
        try await withServedEcho { served in
            let ping = try await Peers.gdbusCall(
                served.bus, destination: served.destination, path: Served.path, method: "org.freedesktop.DBus.Peer.Ping")
            #expect(ping.status == 0, "\(ping.stderr)")
            #expect(ping.stdout == "()\n")
            let machine = try await Peers.gdbusCall(
                served.bus, destination: served.destination, path: Served.path,
                method: "org.freedesktop.DBus.Peer.GetMachineId")
            let daemon = try await Peers.gdbusCall(
                served.bus, destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                method: "org.freedesktop.DBus.Peer.GetMachineId")
            #expect(machine.status == 0, "\(machine.stderr)")
            #expect(machine.stdout.range(of: #"^\('[0-9a-f]{32}',\)\n$"#, options: .regularExpression) != nil)
            #expect(machine.stdout == daemon.stdout)
            let sent = try await Peers.dbusSend(
                served.bus, destination: served.destination, path: Served.path, method: "org.freedesktop.DBus.Peer.Ping")
            #expect(sent.status == 0, "\(sent.stderr)")
        }
    }

    @Test func gdbusIntrospectShowsTheInterface() async throws {
        try await withServedEcho { served in
            let text = try await TestProcess.run(
                Peers.gdbus,
                ["introspect", "--address", served.bus.address, "--dest", served.destination, "--object-path", Served.path],
                timeLimit: .seconds(30))
            #expect(text.status == 0, "\(text.stderr)")
            for fragment in [
                "interface org.example.Echo1 {", "Echo(in  v value,", "out v value);", "Concat(in  s a,", "in  s b,",
                "out s ab);", "Fail();", "Pinged(u count);", "readonly u Version", "readwrite i Volume",
                "interface org.freedesktop.DBus.Properties {", "interface org.freedesktop.DBus.Peer {",
            ] {
                #expect(text.stdout.contains(fragment), "missing \(fragment) in \(text.stdout)")
            }
        }
    }

    @Test func introspectionXMLDescribesTheObjectAndItsParents() async throws {
        try await withServedEcho { served in
            func xml(_ path: String) async throws -> IntrospectedNode {
                let result = try await TestProcess.run(
                    Peers.gdbus,
                    ["introspect", "--xml", "--address", served.bus.address, "--dest", served.destination, "--object-path", path],
                    timeLimit: .seconds(30))
                #expect(result.status == 0, "\(result.stderr)")
                return try IntrospectedNode.parse(result.stdout)
            }
            let node = try await xml(Served.path)
            #expect(
                Set(node.interfaces.keys) == [
                    "org.example.Echo1", "org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Introspectable",
                    "org.freedesktop.DBus.Properties",
                ])
            let echo = try #require(node.interfaces["org.example.Echo1"])
            #expect(echo.methods["Echo"] == ["in v value", "out v value"])
            #expect(echo.methods["Concat"] == ["in s a", "in s b", "out s ab"])
            #expect(echo.methods["Fail"] == [])
            #expect(echo.signals == ["Pinged": ["u count"]])
            #expect(echo.properties == ["Version": "u read", "Volume": "i readwrite"])
            #expect(node.interfaces["org.freedesktop.DBus.Properties"]?.methods["Get"] == [
                "in s interface_name", "in s property_name", "out v value",
            ])
            #expect(node.children.isEmpty)

            #expect(try await xml("/").children == ["org"])
            #expect(try await xml("/org").children == ["example"])
            let parent = try await xml("/org/example")
            #expect(parent.children == ["Echo"])
            #expect(parent.interfaces.isEmpty)
            try await served.server.export([Fixtures.silentInterface()], at: "/org/example/Silent/Deep")
            #expect(try await xml("/org/example").children == ["Echo", "Silent"])
            #expect(try await xml("/org/example/Silent").children == ["Deep"])

            let missing = try await TestProcess.run(
                Peers.gdbus,
                ["introspect", "--xml", "--address", served.bus.address, "--dest", served.destination,
                 "--object-path", "/org/other"],
                timeLimit: .seconds(30))
            #expect(missing.status != 0)
            #expect(missing.stderr.contains("org.freedesktop.DBus.Error.UnknownObject"), "\(missing.stderr)")
        }
    }

    // MARK: - No reply expected

    @Test func callWithNoReplyExpectedRunsWithoutAReply() async throws {
        try await withServedEcho { served in
            let client = try await served.bus.connect()
            let clientName = try #require(client.uniqueName).rawValue
            let monitor = try await Peers.monitor(
                served.bus, rules: ["sender='\(clientName)'", "sender='\(served.destination)'"])

            // When the client sends Echo without expecting a reply, the handler runs.
            var call = try DBusMessage.methodCall(
                destination: BusName(served.destination), path: ObjectPath(Served.path), interface: "org.example.Echo1",
                member: "Echo", body: [.variant(.string("quiet"))])
            call.noReplyExpected = true
            try client.send(call)
            await served.calls.wait(untilCount: 1)

            // Then a later call is answered, and nothing answered the first one.
            let reply = try await client.call(
                try DBusMessage.methodCall(
                    destination: BusName(served.destination), path: ObjectPath(Served.path),
                    interface: "org.example.Echo1", member: "Concat", body: [.string("a"), .string("b")]))
            let concatSerial = try #require(reply.replySerial)
            let echoLine = try await monitor.line(where: { $0.hasPrefix("method call") && $0.contains("member=Echo") })
            let echoSerial = try #require(Self.field("serial", in: echoLine.line))
            let (_, skipped) = try await monitor.line(where: {
                $0.hasPrefix("method return") && Self.field("reply_serial", in: $0) == concatSerial
            })
            let answers = skipped.filter { $0.hasPrefix("method return") || $0.hasPrefix("error") }
            #expect(answers.allSatisfy { Self.field("reply_serial", in: $0) != echoSerial }, "\(answers)")
            #expect(served.calls.all == ["Echo", "Concat"])
            await monitor.terminate()
            await client.close()
        }
    }

    /// A numeric `name=value` field of a dbus-monitor header line.
    static func field(_ name: String, in line: String) -> UInt32? {
        for part in line.split(separator: " ") where part.hasPrefix("\(name)=") {
            return UInt32(part.dropFirst(name.count + 1))
        }
        return nil
    }
}

/// The parts of an introspection document the tests compare: interfaces with their members, and child nodes.
struct IntrospectedNode {
    struct Interface: Equatable {
        /// Method name → its arguments as "direction type name".
        var methods: [String: [String]] = [:]
        /// Signal name → its arguments as "type name".
        var signals: [String: [String]] = [:]
        /// Property name → "type access".
        var properties: [String: String] = [:]
    }

    struct ParseFailure: Error, CustomStringConvertible {
        var description: String
    }

    var interfaces: [String: Interface] = [:]
    var children: [String] = []

    static func parse(_ text: String) throws -> IntrospectedNode {
        let builder = Builder()
        let parser = XMLParser(data: Data(text.utf8))
        parser.delegate = builder
        guard parser.parse(), builder.failure == nil else {
            throw ParseFailure(
                description: "invalid introspection XML (\(builder.failure ?? parser.parserError.map(String.init(describing:)) ?? "?")): \(text)")
        }
        return builder.node
    }

    private final class Builder: NSObject, XMLParserDelegate {
        var node = IntrospectedNode()
        var failure: String?
        private var depth = 0
        private var interface: String?
        private var member: (kind: String, name: String)?

        func parser(
            _ parser: XMLParser, didStartElement element: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            depth += 1
            switch element {
            case "node" where depth == 2:
                node.children.append(attributes["name"] ?? "")
            case "interface":
                interface = attributes["name"]
                node.interfaces[interface ?? ""] = Interface()
            case "method", "signal":
                guard let interface, let name = attributes["name"] else { return fail("\(element) outside an interface") }
                member = (element, name)
                if element == "method" {
                    node.interfaces[interface]?.methods[name] = []
                } else {
                    node.interfaces[interface]?.signals[name] = []
                }
            case "arg":
                guard let interface, let member else { return fail("arg outside a member") }
                let type = attributes["type"] ?? "?", name = attributes["name"] ?? ""
                if member.kind == "method" {
                    node.interfaces[interface]?.methods[member.name]?.append("\(attributes["direction"] ?? "in") \(type) \(name)")
                } else {
                    node.interfaces[interface]?.signals[member.name]?.append("\(type) \(name)")
                }
            case "property":
                guard let interface, let name = attributes["name"] else { return fail("property outside an interface") }
                node.interfaces[interface]?.properties[name] = "\(attributes["type"] ?? "?") \(attributes["access"] ?? "?")"
            default:
                break
            }
        }

        func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
            depth -= 1
            if element == "interface" { interface = nil }
            if element == "method" || element == "signal" { member = nil }
        }

        private func fail(_ reason: String) {
            failure = failure ?? reason
        }
    }
}
