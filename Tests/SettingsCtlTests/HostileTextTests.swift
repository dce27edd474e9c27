// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// Text other processes chose (a schema's summary, description and choices, a writer's process name, a value)
/// is printed by `settingsctl` for people with every character a terminal acts on made visible; `--json` keeps
/// it exact, and `dump` stays loadable.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct HostileTextTests {
    /// Hides the rest of the screen.
    static let conceal = "\u{1B}[8m"
    static let summary = "Theme\(conceal) hidden"
    static let description = "Sets a title\u{1B}]0;pwned\u{07} and \u{202E}reversed\u{202C}, then\u{2028}a new line\u{85}"
    static let choice = "light\u{1B}[2J"
    static let value = "v\(conceal)\u{2028}x\u{9B}"
    /// The writer's process name: `/proc/PID/comm`, which a process sets with prctl(PR_SET_NAME).
    static let process = "app\(conceal)"

    /// A python3-dbus peer that names itself `process`, registers `/test/evil/theme` (summary, description and
    /// choices as above) and the secret `/test/evil/token` (the same summary), and sets `/test/evil/text`.
    static let peer = #"""
        import ctypes, sys
        import dbus
        summary, description, choice, value, process = sys.argv[1:6]
        ctypes.CDLL(None).prctl(15, process.encode(), 0, 0, 0)  # PR_SET_NAME
        assert open("/proc/self/comm", "rb").read() == process.encode() + b"\n"
        bus = dbus.SessionBus()
        settings = dbus.Interface(
            bus.get_object("io.github.settingsbus.Settings1", "/io/github/settingsbus/Settings1"),
            "io.github.settingsbus.Settings1")
        settings.Register("/test/evil/theme", "s", dbus.String("dark", variant_level=1), dbus.Dictionary({
            "summary": summary, "description": description,
            "choices": dbus.Array(["dark", choice], signature="s")}, signature="sv"))
        settings.Register("/test/evil/token", "s", dbus.String("", variant_level=1), dbus.Dictionary({
            "summary": summary, "description": description, "secret": True}, signature="sv"))
        settings.Set("/test/evil/text", dbus.String(value, variant_level=1))
        settings.Set("/test/evil/token", dbus.String(value, variant_level=1))
        print("done", flush=True)
        """#

    /// The characters none of the outputs for people may hold raw.
    static func hidden(in text: String) -> [String] {
        text.unicodeScalars.filter { scalar in
            switch scalar.value {
            case 0x0A: false
            case 0x00..<0x20, 0x7F..<0xA0, 0x2028, 0x2029, 0x202A...0x202E: true
            default: false
            }
        }.map { String(format: "U+%04X", $0.value) }
    }

    static func expectVisible(_ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(hidden(in: text) == [], "\(what) holds raw \(hidden(in: text)): \(text.debugDescription)", sourceLocation: sourceLocation)
    }

    static func json(_ text: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8))
    }

    @Test func textOtherProcessesChoseIsPrintedVisibleAndExactInJSON() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let peer = try await TestProcess.run(
                "/usr/bin/python3", ["-c", Self.peer, Self.summary, Self.description, Self.choice, Self.value, Self.process],
                environment: bus.environment)
            try #require(peer.status == 0 && peer.stdout == "done\n", "\(peer.stderr)")

            // describe: the summary, description and choices made visible; exact in JSON.
            let described = try await Ctl.output(bus, ["describe", "/test/evil/theme"])
            Self.expectVisible(described, "describe")
            #expect(described.contains(#"Theme\x1b[8m hidden"#), "\(described)")
            #expect(described.contains(#"\x1b]0;pwned\x07 and \u202ereversed\u202c, then\u2028a new line\u0085"#), "\(described)")
            #expect(described.contains(#"['dark', 'light\u001b[2J']"#), "\(described)")
            let describedJSON = try #require(try Self.json(try await Ctl.output(bus, ["describe", "--json", "/test/evil/theme"])) as? [String: Any])
            #expect(describedJSON["summary"] as? String == Self.summary)
            #expect(describedJSON["description"] as? String == Self.description)
            #expect((describedJSON["choices"] as? [String: Any])?["value"] as? [String] == ["dark", Self.choice])

            // log: the writer's process name made visible; exact in JSON.
            let log = try await Ctl.output(bus, ["log", "/test/evil/text"])
            Self.expectVisible(log, "log")
            #expect(log.contains(#"app\x1b[8m (:"#), "\(log)")
            let commits = try #require(try Self.json(try await Ctl.output(bus, ["log", "--json", "/test/evil/text"])) as? [[String: Any]])
            #expect(commits.map { $0["process"] as? String } == [Self.process])

            // get, tree, list and watch: the value in GVariant text, with no raw character either.
            let got = try await Ctl.output(bus, ["get", "/test/evil/text"])
            #expect(got == #"'v\u001b[8m\u2028x\u009b'"# + "\n")
            let gotJSON = try #require(try Self.json(try await Ctl.output(bus, ["get", "--json", "/test/evil/text"])) as? [String: Any])
            #expect(gotJSON["value"] as? String == Self.value)
            let tree = try await Ctl.output(bus, ["tree", "/test/evil/"])
            Self.expectVisible(tree, "tree")
            #expect(tree.contains(#"/test/evil/text 'v\u001b[8m\u2028x\u009b'"#), "\(tree)")
            Self.expectVisible(try await Ctl.output(bus, ["list", "/test/evil/"]), "list")
            let watcher = try RunningProcess.start(
                try Ctl.path(), ["watch", "--initial", "/test/evil/text"], environment: bus.environment)
            let first = try await WatchTests.block(watcher)
            #expect(first == ["/test/evil/text", #"  text='v\u001b[8m\u2028x\u009b'"#])
            _ = await watcher.terminate()

            // check: a schema file's changes from the registered schema name the registered summary.
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("evil-\(UUID().uuidString).schema")
            defer { try? FileManager.default.removeItem(at: file) }
            try "[/test/evil/]\ntheme.type=s\ntheme.default='dark'\ntheme.summary=Theme\ntheme.choices=['dark', 'light']\n"
                .write(to: file, atomically: true, encoding: .utf8)
            let checked = try await Ctl.run(bus, ["check", "--registered", file.path])
            Self.expectVisible(checked.stdout + checked.stderr, "check")
            #expect(checked.stdout.contains(#"Theme\x1b[8m hidden"#), "\(checked.stdout)")

            // dump: the #schema lines and values hold no raw character, and the dump loads back exactly as
            // it is printed (the value exact; the summary as the visible text the dump shows).
            let dump = try await Ctl.output(bus, ["dump", "--include-secrets", "/test/evil/"])
            Self.expectVisible(dump, "dump")
            #expect(dump.contains(#"#schema token.summary=Theme\x1b[8m hidden"#), "\(dump)")
            #expect(dump.contains(#"text='v\u001b[8m\u2028x\u009b'"#), "\(dump)")
            #expect(try await Ctl.output(bus, ["load", "/test/copy/"], input: dump) == "")
            let copied = try #require(try Self.json(try await Ctl.output(bus, ["get", "--json", "/test/copy/text"])) as? [String: Any])
            #expect(copied["value"] as? String == Self.value)
            #expect(try await Ctl.output(bus, ["dump", "--include-secrets", "/test/copy/"]) == dump)

            // An error the broker names the value in: made visible too.
            let refused = try await Ctl.run(bus, ["set", "/test/evil/theme", "'\\u001b[8m'"])
            #expect(refused.status == 4, "\(refused.stderr)")
            Self.expectVisible(refused.stderr, "an error")
            #expect(await broker.stop() == 0)
        }
    }

    /// A process that took the broker's name answers with such text: the key names of `list`, the fields of
    /// `status` and an error's message are made visible, and the JSON keeps them exact.
    @Test func textAServiceOnTheBrokersNameChoseIsPrintedVisible() async throws {
        try await withTestBus { bus in
            let text = "\u{1B}[8m\u{202E}\u{2028}\u{9B}"
            let hostile = try RunningProcess.start(
                "/usr/bin/python3", [Ctl.repository.appendingPathComponent("Tests/Peers/hostile_broker.py").path, text],
                environment: bus.environment)
            let ready = try await hostile.nextLine()
            try #require(ready?.hasPrefix("READY ") == true, "\(String(describing: ready))")

            let list = try await Ctl.output(bus, ["list", "/test/"])
            Self.expectVisible(list, "list")
            #expect(list == #"name\x1b[8m\u202e\u2028\u009b"# + "\nplain\n")
            let names = try #require(try Self.json(try await Ctl.output(bus, ["list", "--json", "/test/"])) as? [String])
            #expect(names == ["name" + text, "plain"])

            let status = try await Ctl.output(bus, ["status"])
            Self.expectVisible(status, "status")
            #expect(status.contains(#"/tmp/store\x1b[8m\u202e\u2028\u009b"#), "\(status)")
            let fields = try #require(try Self.json(try await Ctl.output(bus, ["status", "--json"])) as? [String: Any])
            #expect(fields["store"] as? String == "/tmp/store" + text)
            #expect(fields["problem"] as? String == text)

            let refused = try await Ctl.run(bus, ["get", "/test/key"])
            #expect(refused.status != 0)
            Self.expectVisible(refused.stderr, "an error")
            #expect(refused.stderr.contains(#"refused\x1b[8m\u202e\u2028\u009b"#), "\(refused.stderr)")

            // Completion offers no name that the key grammar refuses.
            #expect(try await CompletionTests.complete("settingsctl get /test/", on: bus) == ["/test/plain"])
            hostile.closeInput()
            #expect(await hostile.waitForExit() == 0)
        }
    }
}
