// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing

/// The broker's D-Bus contract, exercised with peers that are not ours (`dbus-send`, `gdbus`) on a private
/// bus with the real `settings-broker`.
@Suite(.timeLimit(.minutes(2)))
struct BrokerContractTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func dbusSend(_ bus: TestBus, _ method: String, _ arguments: [String]) async throws -> TestProcess.Result {
        try await TestProcess.run(
            "/usr/bin/dbus-send",
            ["--session", "--print-reply=literal", "--dest=io.github.settingsbus.Settings1",
             "/io/github/settingsbus/Settings1", "io.github.settingsbus.Settings1.\(method)"] + arguments,
            environment: bus.environment)
    }

    static func gdbus(_ bus: TestBus, _ method: String, _ arguments: [String]) async throws -> TestProcess.Result {
        try await TestProcess.run(
            "/usr/bin/gdbus",
            ["call", "--session", "--dest", "io.github.settingsbus.Settings1", "--object-path",
             "/io/github/settingsbus/Settings1", "--method", "io.github.settingsbus.Settings1.\(method)"] + arguments,
            environment: bus.environment)
    }

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
                destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
                interface: "org.freedesktop.DBus.Introspectable", member: "Introspect")
            guard case .string(let introspected)? = reply.first else {
                Issue.record("Introspect returned \(reply)")
                return
            }
            let contract = try String(
                contentsOf: Self.repository.appendingPathComponent("dbus/io.github.settingsbus.Settings1.xml"),
                encoding: .utf8)
            let expected = Self.interfaceElement(contract)
            #expect(!expected.isEmpty)
            #expect(Self.interfaceElement(introspected) == expected)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aWrongTypeFromDbusSendIsRefusedAndTheValueKept() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let key = "string:/test/contract/size"
            let register = try await Self.gdbus(bus, "Register", ["/test/contract/size", "i", "<12>", "{'range': <(8, 72)>}"])
            #expect(register.status == 0, "\(register.stderr)")
            #expect(try await Self.dbusSend(bus, "Set", [key, "variant:int32:14"]).status == 0)
            let wrong = try await Self.dbusSend(bus, "Set", [key, "variant:string:huge"])
            #expect(wrong.status != 0)
            #expect(wrong.stderr.contains("io.github.settingsbus.Settings1.Error.TypeMismatch"), "\(wrong.stderr)")
            let out = try await Self.dbusSend(bus, "Set", [key, "variant:int32:100"])
            #expect(out.stderr.contains("io.github.settingsbus.Settings1.Error.OutOfRange"), "\(out.stderr)")
            let read = try await Self.gdbus(bus, "Get", ["/test/contract/size"])
            #expect(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(<14>,)")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func setFromStringStoresArraysAndDictionariesThatDbusSendCannotSend() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let cases = [
                ("/test/text/list", "['a', 'b c']", "(<['a', 'b c']>,)"),
                ("/test/text/map", "{'x': <1>, 'y': <'two'>}", "(<{'x': <1>, 'y': <'two'>}>,)"),
                ("/test/text/pairs", "@a(su) [('one', 1)]", "(<[('one', uint32 1)]>,)"),
            ]
            for (key, text, printed) in cases {
                let set = try await Self.dbusSend(bus, "SetFromString", ["string:\(key)", "string:\(text)"])
                #expect(set.status == 0, "\(set.stderr)")
                let read = try await Self.gdbus(bus, "Get", [key])
                #expect(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == printed)
            }
            let bad = try await Self.dbusSend(bus, "SetFromString", ["string:/test/text/bad", "string:[1, "])
            #expect(bad.stderr.contains("io.github.settingsbus.Settings1.Error.InvalidValue"), "\(bad.stderr)")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func changedCarriesItsArgumentsAndArg0pathFiltersInTheBus() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let listener = try await bus.connect()
            var rule = MatchRule(
                sender: "io.github.settingsbus.Settings1", interface: "io.github.settingsbus.Settings1",
                member: "Changed")
            rule.argumentPaths[0] = "/a/"
            let signals = Collector(try await listener.signals(matching: rule))
            let writer = try await bus.connect()
            func call(_ member: MemberName, _ arguments: [DBusValue]) async throws -> [DBusValue] {
                try await writer.call(
                    destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
                    interface: "io.github.settingsbus.Settings1", member: member, arguments: arguments)
            }

            // A change under /b/ is not delivered to a subscriber of /a/; the later change under /a/ is the
            // first signal it receives.
            _ = try await call("Set", [.string("/b/other"), .variant(.int32(1))])
            let reply = try await call(
                "Apply",
                [
                    .dictionary(
                        key: .string, value: .variant,
                        [DBusDictEntry(key: .string("/a/x"), value: .variant(.variant(.string("one")))),
                         DBusDictEntry(key: .string("/a/y/z"), value: .variant(.boolean(true)))]),
                    .array(.string, []), .dictionary(key: .string, value: .variant, []),
                ])
            let signal = try await signals.next()
            #expect(signal.body.count == 5)
            #expect(signal.body[0] == .string("/a/"))
            #expect(
                signal.body[1]
                    == .dictionary(
                        key: .string, value: .variant,
                        [DBusDictEntry(key: .string("/a/x"), value: .variant(.variant(.string("one")))),
                         DBusDictEntry(key: .string("/a/y/z"), value: .variant(.boolean(true)))]))
            #expect(signal.body[2] == .array(.string, []))
            #expect(reply.first.map { signal.body[3] == $0 } == true, "the signal's serial is the reply's")
            #expect(signal.body[4] == .string(writer.uniqueName?.rawValue ?? ""))

            _ = try await call("Reset", [.string("/a/x")])
            let reset = try await signals.next()
            #expect(reset.body[0] == .string("/a/x") && reset.body[2] == .array(.string, [.string("/a/x")]))

            signals.stop()
            await writer.close()
            await listener.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func valuesAndSchemasSurviveSIGTERMAndARestart() async throws {
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus)
            #expect(try await Self.gdbus(bus, "Register", ["/test/keep/volume", "d", "<0.5>", "{'summary': <'Volume'>}"]).status == 0)
            for index in 0..<20 {
                #expect(try await Self.dbusSend(bus, "Set", ["string:/test/keep/k\(index)", "variant:int32:\(index)"]).status == 0)
            }
            #expect(try await Self.dbusSend(bus, "Set", ["string:/test/keep/volume", "variant:double:0.25"]).status == 0)

            // When: SIGTERM (the broker exits 0), then a new broker on the same store.
            let restarted = try await broker.restart()
            #expect(restarted.exitStatus == 0)
            broker = restarted.broker

            // Then: every acknowledged write, and the schema, are there.
            let tree = try await Self.gdbus(bus, "ReadTree", ["/test/keep/"])
            for index in 0..<20 { #expect(tree.stdout.contains("'/test/keep/k\(index)': <\(index)>")) }
            #expect(tree.stdout.contains("'/test/keep/volume': <0.25>"))
            let wrong = try await Self.dbusSend(bus, "Set", ["string:/test/keep/volume", "variant:string:loud"])
            #expect(wrong.stderr.contains("TypeMismatch"), "the schema did not survive: \(wrong.stderr)")
            let describe = try await Self.gdbus(bus, "Describe", ["/test/keep/volume"])
            #expect(describe.stdout.contains("'summary': <'Volume'>"), "\(describe.stdout)")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aSecondBrokerOnTheSameBusExitsSayingTheNameIsOwned() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("second-\(UUID())")
            defer { try? FileManager.default.removeItem(at: directory) }
            let second = try await TestProcess.run(
                try TestBroker.executablePath(),
                ["--bus", bus.address, "--store", directory.appendingPathComponent("s.db").path],
                timeLimit: .seconds(30))
            #expect(second.status != 0)
            #expect(second.stderr.contains("io.github.settingsbus.Settings1"), "\(second.stderr)")
            #expect(second.stderr.lowercased().contains("own"), "\(second.stderr)")
            #expect(await broker.stop() == 0)
        }
    }
}
