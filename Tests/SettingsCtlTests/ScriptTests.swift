// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The recipes in `examples/scripts/`: each runs against the real broker on a private bus (its address in
/// `DBUS_SESSION_BUS_ADDRESS`, which `--session` and `--user` read), and prints what its README says.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ScriptTests {
    static let scripts = Ctl.repository.appendingPathComponent("examples/scripts")

    /// Runs `examples/scripts/<tool>/<name>.sh` with `arguments`.
    static func run(
        _ bus: TestBus, _ tool: String, _ name: String, _ arguments: [String] = [], environment: [String: String] = [:]
    ) async throws -> TestProcess.Result {
        let script = scripts.appendingPathComponent("\(tool)/\(name).sh").path
        return try await TestProcess.run(
            script, arguments, environment: bus.environment.merging(environment) { _, new in new })
    }

    /// Runs a script, expects status 0, and returns its standard output.
    static func output(
        _ bus: TestBus, _ tool: String, _ name: String, _ arguments: [String] = [],
        environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        let result = try await run(bus, tool, name, arguments, environment: environment)
        #expect(result.status == 0, "\(tool)/\(name).sh: \(result.stderr)", sourceLocation: sourceLocation)
        return result.stdout
    }

    /// Runs a script and expects it to fail with a message containing `message`.
    static func failure(
        _ bus: TestBus, _ tool: String, _ name: String, _ arguments: [String], message: String,
        environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let result = try await run(bus, tool, name, arguments, environment: environment)
        #expect(result.status != 0, "\(tool)/\(name).sh succeeded: \(result.stdout)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(message), "\(result.stderr)", sourceLocation: sourceLocation)
    }

    @Test func everyDbusSendRecipe() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let tool = "dbus-send"
            #expect(try await Self.output(bus, tool, "set", ["/test/scripts/size", "int32:12"]) == "   uint64 1\n")
            #expect(
                try await Self.output(bus, tool, "set-from-string", ["/test/scripts/recent", "['a.txt', 'b.txt']"])
                    == "   uint64 2\n")
            #expect(try await Self.output(bus, tool, "get", ["/test/scripts/size"]) == "   variant       int32 12\n")
            #expect(
                try await Self.output(bus, tool, "get-many", ["/test/scripts/size", "/test/scripts/none"])
                    == """
                       array [
                          dict entry(
                             /test/scripts/size         variant             int32 12
                          )
                       ]
                       uint64 2

                    """)
            let tree = try await Self.output(bus, tool, "read-tree", ["/test/scripts/"])
            #expect(tree.contains("/test/scripts/recent"), "\(tree)")
            #expect(tree.contains("/test/scripts/size         variant             int32 12"), "\(tree)")
            #expect(tree.hasSuffix("   uint64 2\n"), "\(tree)")
            #expect(
                try await Self.output(bus, tool, "list", ["/test/scripts/"])
                    == "   array [\n      recent      size   ]\n")
            let description = try await Self.output(bus, tool, "describe", ["/test/scripts/size"])
            #expect(description.contains("signature         variant             i"), "\(description)")
            #expect(description.contains("value         variant             int32 12"), "\(description)")
            #expect(
                try await Self.output(bus, tool, "properties")
                    == "   variant       uint64 2\n   variant       uint32 5\n")
            #expect(try await Self.output(bus, tool, "reset", ["/test/scripts/"]) == "   uint64 3\n")
            try await Self.failure(bus, tool, "get", ["/test/scripts/size"], message: "Error.UnknownKey")
            try await Self.failure(
                bus, tool, "set", ["/test/scripts/bad//key", "int32:1"], message: "Error.InvalidKey")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func everyGdbusRecipe() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let tool = "gdbus"
            #expect(
                try await Self.output(
                    bus, tool, "register",
                    [
                        "/test/scripts/tab-width", "u", "uint32 4",
                        "{'summary': <'Spaces per tab'>, 'range': <(uint32 1, uint32 16)>}",
                    ]) == "()\n")
            #expect(try await Self.output(bus, tool, "set", ["/test/scripts/theme", "'dark'"]) == "(uint64 2,)\n")
            #expect(
                try await Self.output(bus, tool, "set", ["/test/scripts/window", "{'width': <800>}"])
                    == "(uint64 3,)\n")
            #expect(
                try await Self.output(bus, tool, "set-from-string", ["/test/scripts/tab-width", "8"])
                    == "(uint64 4,)\n")
            #expect(
                try await Self.output(bus, tool, "set-from-string", ["/test/scripts/quote", "['it\\'s', 'x']"])
                    == "(uint64 5,)\n")
            #expect(try await Self.output(bus, tool, "get", ["/test/scripts/quote"]) == #"(<["it's", 'x']>,)"# + "\n")
            #expect(try await Self.output(bus, tool, "get", ["/test/scripts/tab-width"]) == "(<uint32 8>,)\n")
            #expect(
                try await Self.output(bus, tool, "get-many", ["/test/scripts/theme", "/test/scripts/none"])
                    == "({'/test/scripts/theme': <'dark'>}, uint64 5)\n")
            #expect(
                try await Self.output(
                    bus, tool, "apply", ["{'/test/scripts/theme': <'light'>, '/test/scripts/size': <14>}"])
                    == "(uint64 6,)\n")
            #expect(
                try await Self.output(
                    bus, tool, "apply",
                    ["{'/test/scripts/size': <15>}", "['/test/scripts/window']", "{'if-serial': <uint64 6>}"])
                    == "(uint64 7,)\n")
            try await Self.failure(
                bus, tool, "apply", ["{'/test/scripts/size': <16>}", "@as []", "{'if-serial': <uint64 6>}"],
                message: "Error.Conflict")
            #expect(
                try await Self.output(bus, tool, "read-tree", ["/test/scripts/"])
                    == "({'/test/scripts/quote': <[\"it's\", 'x']>, '/test/scripts/size': <15>, "
                    + "'/test/scripts/tab-width': <uint32 8>, '/test/scripts/theme': <'light'>}, uint64 7)\n")
            #expect(
                try await Self.output(bus, tool, "list", ["/test/"]) == "(['scripts/'],)\n")
            let description = try await Self.output(bus, tool, "describe", ["/test/scripts/tab-width"])
            #expect(description.contains("'summary': <'Spaces per tab'>"), "\(description)")
            #expect(description.contains("'range': <(uint32 1, uint32 16)>"), "\(description)")
            #expect(description.contains("'value': <uint32 8>"), "\(description)")
            #expect(
                try await Self.output(bus, tool, "properties")
                    == "({'Serial': <uint64 7>, 'Version': <uint32 5>},)\n")
            #expect(try await Self.output(bus, tool, "reset", ["/test/scripts/theme"]) == "(uint64 8,)\n")
            try await Self.failure(
                bus, tool, "set", ["/test/scripts/tab-width", "'wide'"], message: "Error.TypeMismatch")
            try await Self.failure(
                bus, tool, "set-from-string", ["/test/scripts/tab-width", "99"], message: "Error.OutOfRange")
            try await Self.failure(
                bus, tool, "register", ["/test/scripts/tab-width", "i", "4"], message: "Error.SchemaConflict")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func everyBusctlRecipe() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let tool = "busctl"
            #expect(
                try await Self.output(
                    bus, tool, "register", ["/test/scripts/tab-width", "u", "4", "Spaces per tab", "1", "16"])
                    == "")
            #expect(
                try await Self.output(bus, tool, "set", ["/test/scripts/recent", "as", "2", "a.txt", "b.txt"])
                    == "t 2\n")
            #expect(try await Self.output(bus, tool, "set", ["/test/scripts/theme", "s", "dark"]) == "t 3\n")
            #expect(
                try await Self.output(bus, tool, "set-from-string", ["/test/scripts/tab-width", "8"]) == "t 4\n")
            #expect(
                try await Self.output(bus, tool, "get", ["/test/scripts/recent"]) == #"v as 2 "a.txt" "b.txt""# + "\n")
            #expect(try await Self.output(bus, tool, "get", ["/test/scripts/tab-width"]) == "v u 8\n")
            #expect(
                try await Self.output(bus, tool, "get-many", ["/test/scripts/theme", "/test/scripts/none"])
                    == #"a{sv}t 1 "/test/scripts/theme" s "dark" 4"# + "\n")
            #expect(
                try await Self.output(
                    bus, tool, "apply", ["/test/scripts/theme", "s", "light", "/test/scripts/size", "i", "14"])
                    == "t 5\n")
            #expect(
                try await Self.output(
                    bus, tool, "apply", ["/test/scripts/size", "i", "15"], environment: ["IF_SERIAL": "5"]) == "t 6\n")
            try await Self.failure(
                bus, tool, "apply", ["/test/scripts/size", "i", "16"], message: "changed at serial 6",
                environment: ["IF_SERIAL": "5"])
            #expect(
                try await Self.output(bus, tool, "read-tree", ["/test/scripts/"])
                    == #"{"type":"a{sv}t","data":[{"/test/scripts/recent":{"type":"as","data":["a.txt","b.txt"]},"#
                    + #""/test/scripts/size":{"type":"i","data":15},"/test/scripts/tab-width":{"type":"u","data":8},"#
                    + #""/test/scripts/theme":{"type":"s","data":"light"}},6]}"# + "\n")
            #expect(
                try await Self.output(bus, tool, "list", ["/test/scripts/"])
                    == #"as 4 "recent" "size" "tab-width" "theme""# + "\n")
            let description = try await Self.output(bus, tool, "describe", ["/test/scripts/tab-width"])
            #expect(description.contains(#""summary" s "Spaces per tab""#), "\(description)")
            #expect(description.contains(#""range" (uu) 1 16"#), "\(description)")
            #expect(description.contains(#""value" u 8"#), "\(description)")
            #expect(try await Self.output(bus, tool, "properties") == "t 6\nu 5\n")
            #expect(try await Self.output(bus, tool, "reset", ["/test/scripts/"]) == "t 7\n")
            try await Self.failure(bus, tool, "get", ["/test/scripts/theme"], message: "has no value")
            try await Self.failure(bus, tool, "set", ["/test/scripts/tab-width", "u", "99"], message: "out of range")
            #expect(await broker.stop() == 0)
        }
    }

    // MARK: - Watching

    @Test func dbusMonitorRecipePrintsChangesUnderADirectory() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let monitor = try RunningProcess.start(
                Self.scripts.appendingPathComponent("dbus-send/watch.sh").path, ["/test/watched/"],
                environment: bus.environment)
            // Given: dbus-monitor listens once it has printed the NameLost of becoming a monitor.
            try await monitor.line(where: { $0.contains("member=NameLost") })

            // When: a key outside the directory changes, then one inside it.
            _ = try await Ctl.output(bus, ["set", "/test/elsewhere", "1"])
            _ = try await Ctl.output(bus, ["set", "/test/watched/theme", "'dark'"])

            // Then: only the second one is printed.
            let (header, skipped) = try await monitor.line(where: { $0.contains("member=Changed") })
            #expect(header.contains("path=/io/github/settingsbus/Settings1"), "\(header)")
            #expect(try await monitor.nextLine() == #"   string "/test/watched/theme""#, "\(skipped)")
            let body = try await monitor.line(where: { $0.contains("uint64") })
            #expect(body.line == "   uint64 2", "\(body.skipped)")
            #expect(body.skipped.contains { $0.contains(#"string "dark""#) }, "\(body.skipped)")
            #expect(await monitor.terminate() == 143)
            #expect(await broker.stop() == 0)
        }
    }

    @Test func gdbusMonitorRecipePrintsEveryChange() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let monitor = try RunningProcess.start(
                Self.scripts.appendingPathComponent("gdbus/watch.sh").path, [], environment: bus.environment)
            // Given: gdbus has subscribed once it reports the name's owner.
            try await monitor.line(where: { $0.hasPrefix("The name io.github.settingsbus.Settings1 is owned by") })

            // When: a key changes.
            _ = try await Ctl.output(bus, ["set", "/test/watched/theme", "'dark'"])

            // Then: its Changed signal is printed, with the writer's unique name at the end.
            let line = try #require(try await monitor.nextLine())
            #expect(
                line.hasPrefix(
                    "/io/github/settingsbus/Settings1: io.github.settingsbus.Settings1.Changed ('/test/watched/theme', "
                        + "{'/test/watched/theme': <'dark'>}, @as [], uint64 1, ':1."),
                "\(line)")
            #expect(await monitor.terminate() == 143)
            #expect(await broker.stop() == 0)
        }
    }

    @Test func busctlMonitorRecipePrintsChangesAsJSON() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let monitor = try RunningProcess.start(
                Self.scripts.appendingPathComponent("busctl/watch.sh").path, ["/test/watched/"],
                environment: bus.environment)
            // Given: busctl prints nothing on standard output when it starts listening, so changes are made
            // until the first one is printed (each attempt waits for the line, never for a fixed time).
            var ready = false
            for attempt in 1...20 where !ready {
                _ = try await Ctl.output(bus, ["set", "/test/watched/probe", "\(attempt)"])
                ready = (try? await monitor.nextLine(timeLimit: .seconds(1))) != nil
            }
            #expect(ready)
            // When: a key outside the directory changes, then one inside it.
            _ = try await Ctl.output(bus, ["set", "/test/elsewhere", "1"])
            _ = try await Ctl.output(bus, ["set", "/test/watched/theme", "'dark'"])

            // Then: the next line is the second change, as JSON.
            let (line, _) = try await monitor.line(where: {
                $0.contains("/test/watched/theme") || $0.contains("/test/elsewhere")
            })
            #expect(line.contains(#""member":"Changed""#), "\(line)")
            let body =
                #"{"type":"sa{sv}asts","data":["/test/watched/theme",{"/test/watched/theme":"#
                + #"{"type":"s","data":"dark"}},[],"#
            #expect(line.contains(body), "\(line)")
            #expect(await monitor.terminate() == 143)
            #expect(await broker.stop() == 0)
        }
    }
}
