// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// Every verb of `settingsctl`, run as a process against the real broker on a private bus.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct VerbTests {
    @Test func setParsesTextAgainstTheRegisteredTypeAndGetPrintsItAnnotated() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let schema = """
                [/test/verbs/]
                volume.type=d
                volume.default=0.25
                tab-width.type=u
                tab-width.default=4
                """
            #expect(try await Ctl.output(bus, ["register", "-"], input: schema) == "")
            // A registered double and uint32 need no annotations; an unregistered key takes the text's type.
            #expect(try await Ctl.output(bus, ["set", "/test/verbs/volume", "0.5"]) == "")
            #expect(try await Ctl.output(bus, ["set", "/test/verbs/tab-width", "8"]) == "")
            #expect(try await Ctl.output(bus, ["set", "/test/verbs/offset", "-5"]) == "")
            #expect(try await Ctl.output(bus, ["write", "/test/verbs/recent", "['a.txt', 'b.txt']"]) == "")
            #expect(try await Ctl.output(bus, ["set", "/test/verbs/big", "int64 5"]) == "")
            #expect(try await Ctl.output(bus, ["get", "/test/verbs/volume"]) == "0.5\n")
            #expect(try await Ctl.output(bus, ["get", "/test/verbs/tab-width"]) == "uint32 8\n")
            #expect(try await Ctl.output(bus, ["read", "/test/verbs/offset"]) == "-5\n")
            #expect(try await Ctl.output(bus, ["get", "/test/verbs/recent"]) == "['a.txt', 'b.txt']\n")
            #expect(try await Ctl.output(bus, ["get", "/test/verbs/big"]) == "int64 5\n")
            #expect(
                try await Ctl.output(bus, ["get", "--json", "/test/verbs/tab-width"])
                    == #"{"key":"/test/verbs/tab-width","type":"u","value":8,"text":"uint32 8"}"# + "\n")
            // The global option is accepted before the verb as well.
            #expect(try await Ctl.output(bus, ["--bus", bus.address, "get", "/test/verbs/big"]) == "int64 5\n")
            #expect(await broker.stop() == 0)
        }
    }

    /// A schema file's key with a type and no default registers a key that has no value until one is set.
    @Test func aSchemaFileKeyWithoutADefaultHasNoValueUntilSet() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            #expect(
                try await Ctl.output(bus, ["register", "-"], input: "[/test/nodefault/]\nhome.type=s\nhome.summary=Home\n")
                    == "")
            try await Ctl.failure(bus, ["get", "/test/nodefault/home"], status: 3, message: "/test/nodefault/home")
            let described = try await Ctl.output(bus, ["describe", "/test/nodefault/home"])
            #expect(described.contains("registered: true") && !described.contains("default:"), "\(described)")
            #expect(try await Ctl.output(bus, ["set", "/test/nodefault/home", "/home/ada"]) == "")
            #expect(try await Ctl.output(bus, ["get", "/test/nodefault/home"]) == "'/home/ada'\n")
            #expect(await broker.stop() == 0)
        }
    }

    /// `unregister` removes a schema and keeps the value; `--remove-value` removes both; an unknown key exits 3.
    @Test func unregisterRemovesTheSchemaAndKeepsTheValueUnlessAsked() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let schema = """
                [/test/unreg/]
                volume.type=d
                volume.default=0.25
                width.type=i
                width.default=3
                """
            #expect(try await Ctl.output(bus, ["register", "-"], input: schema) == "")
            #expect(try await Ctl.output(bus, ["set", "/test/unreg/volume", "0.5"]) == "")
            #expect(try await Ctl.output(bus, ["unregister", "/test/unreg/volume"]) == "")
            #expect(try await Ctl.output(bus, ["get", "/test/unreg/volume"]) == "0.5\n")
            #expect(try await Ctl.output(bus, ["describe", "/test/unreg/volume"]).contains("registered: false"))
            #expect(try await Ctl.output(bus, ["set", "/test/unreg/volume", "'loud'"]) == "")
            #expect(try await Ctl.output(bus, ["unregister", "--remove-value", "/test/unreg/volume"]) == "")
            try await Ctl.failure(bus, ["get", "/test/unreg/volume"], status: 3, message: "/test/unreg/volume")
            try await Ctl.failure(
                bus, ["unregister", "/test/unreg/volume"], status: 3, message: "nothing to unregister")
            #expect(try await Ctl.output(bus, ["unregister", "/test/unreg/width"]) == "")
            try await Ctl.failure(bus, ["get", "/test/unreg/width"], status: 3, message: "/test/unreg/width")
            #expect(await broker.stop() == 0)
        }
    }

    /// A registered string key takes a bare word, as gsettings does; an unregistered key says how to quote one.
    @Test func aRegisteredStringKeyTakesABareWord() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let schema = """
                [/test/bare/]
                theme.type=s
                theme.default='light'
                theme.choices=['light', 'dark', 'true']
                count.type=i
                count.default=1
                """
            #expect(try await Ctl.output(bus, ["register", "-"], input: schema) == "")
            #expect(try await Ctl.output(bus, ["set", "/test/bare/theme", "dark"]) == "")
            #expect(try await Ctl.output(bus, ["get", "/test/bare/theme"]) == "'dark'\n")
            // A keyword of GVariant text is still a word to a string key; quoted text keeps working.
            #expect(try await Ctl.output(bus, ["set", "/test/bare/theme", "true"]) == "")
            #expect(try await Ctl.output(bus, ["get", "/test/bare/theme"]) == "'true'\n")
            #expect(try await Ctl.output(bus, ["set", "/test/bare/theme", "'light'"]) == "")
            #expect(try await Ctl.output(bus, ["get", "/test/bare/theme"]) == "'light'\n")
            // The schema still decides: a word that is not a choice is refused as such.
            let notAChoice = try await Ctl.run(bus, ["set", "/test/bare/theme", "sepia"])
            #expect(notAChoice.status == 4)
            #expect(notAChoice.stderr.contains("not one of the choices"), "\(notAChoice.stderr)")
            // A number key does not take words.
            let word = try await Ctl.run(bus, ["set", "/test/bare/count", "many"])
            #expect(word.status == 4)
            #expect(!word.stderr.contains("'many'\""), "\(word.stderr)")
            // An unregistered key says how to write a string.
            let unregistered = try await Ctl.run(bus, ["set", "/test/bare/other", "dark"])
            #expect(unregistered.status == 4)
            #expect(unregistered.stderr.contains(#"so a string needs its quotes: "'dark'""#), "\(unregistered.stderr)")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func resetRemovesAValueAndNeedsDashRForADirectory() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["set", "/test/reset/a", "1"])
            _ = try await Ctl.output(bus, ["set", "/test/reset/sub/b", "2"])
            try await Ctl.failure(bus, ["reset", "/test/reset/"], status: 2, message: "reset -r /test/reset/")
            #expect(try await Ctl.output(bus, ["get", "/test/reset/a"]) == "1\n")
            #expect(try await Ctl.output(bus, ["reset", "/test/reset/a"]) == "")
            try await Ctl.failure(bus, ["get", "/test/reset/a"], status: 3, message: "/test/reset/a")
            #expect(try await Ctl.output(bus, ["reset", "-r", "/test/reset/"]) == "")
            #expect(try await Ctl.output(bus, ["tree", "/test/reset/"]) == "")
            _ = try await Ctl.output(bus, ["set", "/test/reset/c", "3"])
            #expect(try await Ctl.output(bus, ["reset", "-f", "/test/reset/"]) == "")
            #expect(try await Ctl.output(bus, ["list", "/test/reset/"]) == "")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func listAndTreeShowADirectory() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["set", "/test/list/theme", "'dark'"])
            _ = try await Ctl.output(bus, ["set", "/test/list/editor/size", "uint32 12"])
            _ = try await Ctl.output(bus, ["set", "/test/list/editor/font", "'Mono'"])
            #expect(try await Ctl.output(bus, ["list", "/test/list/"]) == "editor/\ntheme\n")
            #expect(try await Ctl.output(bus, ["list", "--json", "/test/list/"]) == #"["editor/","theme"]"# + "\n")
            #expect(
                try await Ctl.output(bus, ["tree", "/test/list/"])
                    == "/test/list/editor/font 'Mono'\n/test/list/editor/size uint32 12\n/test/list/theme 'dark'\n")
            let json = try await Ctl.output(bus, ["tree", "--json", "/test/list/editor/"])
            #expect(
                json.hasSuffix(
                    #""values":{"/test/list/editor/font":{"type":"s","value":"Mono","text":"'Mono'"},"#
                        + #""/test/list/editor/size":{"type":"u","value":12,"text":"uint32 12"}}}"# + "\n"),
                "\(json)")
            try await Ctl.failure(bus, ["list", "/test/list"], status: 4, message: "a directory ends with '/'")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func describeAndRegisterShowASchema() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let schemaFile = Ctl.repository.appendingPathComponent("examples/schemas/editor.schema").path
            #expect(try await Ctl.output(bus, ["register", schemaFile]) == "")
            // Registering the same schemas again changes nothing.
            #expect(try await Ctl.output(bus, ["register", schemaFile]) == "")
            _ = try await Ctl.output(bus, ["set", "/org/example/editor/tab-width", "8"])
            let text = try await Ctl.output(bus, ["describe", "/org/example/editor/tab-width"])
            let fields = Self.fields(text)
            #expect(text.hasPrefix("key:"), "\(text)")
            #expect(fields["key"] == "/org/example/editor/tab-width")
            #expect(fields["signature"] == "u")
            #expect(fields["value"] == "uint32 8")
            #expect(fields["default"] == "uint32 4")
            #expect(fields["summary"] == "Spaces per tab")
            #expect(fields["range"] == "(uint32 1, uint32 16)")
            #expect(fields["writable"] == "true")
            #expect(fields["registered"] == "true")
            let json = try await Ctl.output(bus, ["describe", "--json", "/org/example/editor/theme"])
            #expect(json.contains(#""default":{"type":"s","value":"dark","text":"'dark'"}"#), "\(json)")
            #expect(json.contains(#""choices":{"type":"as","value":["light","dark","high-contrast"],"#), "\(json)")

            // The broker enforces what was registered: exit status 4 for the type, the range and the choices.
            try await Ctl.failure(
                bus, ["set", "/org/example/editor/tab-width", "'wide'"], status: 4, message: "type 'u'")
            try await Ctl.failure(bus, ["set", "/org/example/editor/tab-width", "99"], status: 4, message: "range")
            try await Ctl.failure(
                bus, ["set", "/org/example/editor/theme", "'purple'"], status: 4, message: "not one of the choices")
            // A different registration of a registered key is a conflict: status 6.
            try await Ctl.failure(
                bus, ["register", "-"], status: 6, message: "/org/example/editor/tab-width",
                input: "[/org/example/editor/]\ntab-width.type=i\ntab-width.default=4\n")
            #expect(await broker.stop() == 0)
        }
    }

    /// The `name: value` lines of `describe` or `status`.
    static func fields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }

    @Test func malformedInputFailsWithStatus4AndSaysWhere() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Ctl.failure(bus, ["get", "org/example"], status: 4, message: "must start with '/'")
            try await Ctl.failure(bus, ["set", "/test/bad/a//b", "1"], status: 4, message: "invalid key")
            try await Ctl.failure(
                bus, ["set", "/test/bad/text", "'unterminated"], status: 4, message: "/test/bad/text")
            try await Ctl.failure(
                bus, ["register", "-"], status: 4, message: "line 2: unknown field 'colour'",
                input: "[/test/bad/]\nsize.colour=red\n")
            try await Ctl.failure(
                bus, ["register", "-"], status: 4, message: "has neither a type nor a default",
                input: "[/test/bad/]\nsize.summary=Size\n")
            try await Ctl.failure(
                bus, ["load", "/test/bad/"], status: 4,
                message: "line 3: the value of /test/bad/b is not GVariant text",
                input: "[/]\na=1\nb=[1,\n")
            try await Ctl.failure(bus, ["load", "/test/bad/"], status: 4, message: "line 1", input: "a=1\n")
            #expect(try await Ctl.output(bus, ["tree", "/"]) == "")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func usageErrorsExitWith2() async throws {
        try await withTestBus { bus in
            try await Ctl.failure(bus, ["frobnicate"], status: 2, message: "Unexpected argument 'frobnicate'")
            try await Ctl.failure(bus, ["get"], status: 2, message: "Missing expected argument '<key>'")
            try await Ctl.failure(bus, ["set", "/a/b"], status: 2, message: "Missing expected argument '<value>'")
            try await Ctl.failure(bus, ["set", "/a/b", "1", "2"], status: 2, message: "set takes one value")
            try await Ctl.failure(bus, ["get", "--colour", "/a/b"], status: 2, message: "--colour")
        }
    }

    @Test func helpAndCompletionScriptsExitWith0() async throws {
        try await withTestBus { bus in
            let help = try await Ctl.output(bus, ["--help"])
            for line in ["3  unknown key", "4  invalid", "5  broker unavailable", "6  conflict", "7  not writable",
                "8  access denied"] {
                #expect(help.contains(line), "\(help)")
            }
            for verb in [
                "get", "set", "reset", "list", "tree", "dump", "load", "watch", "describe", "register", "status",
            ] {
                #expect(try await Ctl.output(bus, [verb, "--help"]).contains("USAGE: settingsctl \(verb)"))
            }
            for shell in ["bash", "zsh", "fish"] {
                let script = try await Ctl.output(bus, ["--generate-completion-script", shell])
                #expect(script.contains("settingsctl"), "\(shell)")
            }
        }
    }

    @Test func aBusWithoutABrokerExitsWith5AndSaysHowToInstallOne() async throws {
        try await withTestBus { bus in
            // No broker runs and no activation file names one.
            for arguments in [
                ["get", "/test/none/a"], ["set", "/test/none/a", "1"], ["watch", "/test/none/"], ["status"],
            ] {
                try await Ctl.failure(bus, arguments, status: 5, message: "scripts/install")
            }
        }
    }

    @Test func aCallTheBusPolicyRefusesExitsWith7() async throws {
        let bus = try await TestBus.startLikeTheSystemBus()
        let broker = try await TestBroker.start(on: bus)
        _ = try await Ctl.output(bus, ["set", "/test/policy/motd", "'hello'"])
        let asNobody = try await TestProcess.run(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", try Ctl.path(), "set", "/test/policy/motd", "'x'"],
            environment: bus.environment)
        #expect(asNobody.status == 7, "\(asNobody.stderr)")
        #expect(asNobody.stderr.contains("Error: "), "\(asNobody.stderr)")
        #expect(try await Ctl.output(bus, ["get", "/test/policy/motd"]) == "'hello'\n")
        #expect(await broker.stop() == 0)
        await bus.stop()
    }

    @Test func aSecretValueTheBrokerWithholdsExitsWith8() async throws {
        let bus = try await TestBus.startLikeTheSystemBus()
        let broker = try await TestBroker.start(on: bus)
        _ = try await Ctl.output(
            bus, ["register", "-"], input: "[/test/secret/]\ntoken.type=s\ntoken.default=''\ntoken.secret=true\n")
        _ = try await Ctl.output(bus, ["set", "/test/secret/token", "'hunter2'"])
        _ = try await Ctl.output(bus, ["set", "/test/secret/motd", "'hello'"])
        func asNobody(_ arguments: [String]) async throws -> TestProcess.Result {
            try await TestProcess.run(
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", try Ctl.path()] + arguments,
                environment: bus.environment)
        }
        let get = try await asNobody(["get", "/test/secret/token"])
        #expect(get.status == 8, "\(get.stderr)")
        #expect(
            get.stderr.contains("Error: /test/secret/token is a secret key: user 65534 may not read"), "\(get.stderr)")
        let tree = try await asNobody(["tree", "/test/secret/"])
        #expect(tree.status == 0, "\(tree.stderr)")
        #expect(tree.stdout == "/test/secret/motd 'hello'\n", "\(tree.stdout)")
        #expect(try await Ctl.output(bus, ["get", "/test/secret/token"]) == "'hunter2'\n")
        #expect(await broker.stop() == 0)
        await bus.stop()
    }

    @Test func statusReportsTheBrokerAndItsStore() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["set", "/test/status/a", "1"])
            _ = try await Ctl.output(bus, ["set", "/test/status/b", "2"])
            let text = try await Ctl.output(bus, ["status"])
            let fields = Self.fields(text)
            #expect(fields["name"] == "io.github.settingsbus.Settings1", "\(text)")
            #expect(fields["owner"] == broker.uniqueName.rawValue, "\(text)")
            #expect(fields["pid"] == "\(broker.pid)", "\(text)")
            #expect(fields["version"] == "5", "\(text)")
            #expect(fields["serial"] == "2", "\(text)")
            #expect(fields["keys"] == "2", "\(text)")
            #expect(fields["store"] == broker.storePath, "\(text)")
            #expect(fields["health"] == "ok", "\(text)")
            #expect(fields["writable"] == "true", "\(text)")
            let json = try await Ctl.output(bus, ["status", "--json"])
            #expect(json.contains(#""pid":\#(broker.pid)"#), "\(json)")
            #expect(json.contains(#""keys":2"#), "\(json)")
            #expect(json.contains(#""health":"ok""#), "\(json)")
            #expect(await broker.stop() == 0)
        }
    }
}
