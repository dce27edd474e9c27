// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// `dconf dump / | settingsctl load /` loads a real dconf database unchanged, types included.
///
/// dconf runs against a private database: `HOME`, `XDG_CONFIG_HOME` and `XDG_RUNTIME_DIR` point into a
/// temporary directory, `DCONF_PROFILE` names a profile with only that user database, and `dconf-service` is
/// started by D-Bus activation on the test bus (whose daemon has the same environment), never the user's.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct DconfImportTests {
    static let dconf = "/usr/bin/dconf"
    static let dconfService = "/usr/libexec/dconf-service"

    /// Values of every kind `dconf write` takes, as GVariant text.
    static let values: [(String, String)] = [
        ("/org/example/strings/quotes", #""it's \"quoted\"""#),
        ("/org/example/strings/escapes", #"'tab\there\nnewline \\ backslash'"#),
        ("/org/example/strings/unicode", "'é ✓ 日本 \\u00e9'"),
        ("/org/example/strings/empty", "''"),
        ("/org/example/numbers/int32", "-42"),
        ("/org/example/numbers/int64", "int64 5"),
        ("/org/example/numbers/int64-max", "int64 9223372036854775807"),
        ("/org/example/numbers/uint32", "uint32 4294967295"),
        ("/org/example/numbers/uint64", "uint64 18446744073709551615"),
        ("/org/example/numbers/int16", "int16 -32768"),
        ("/org/example/numbers/uint16", "uint16 65535"),
        ("/org/example/numbers/byte", "byte 0xff"),
        ("/org/example/numbers/double", "0.1"),
        ("/org/example/numbers/double-exp", "1e-300"),
        ("/org/example/numbers/double-neg", "-2.5"),
        ("/org/example/flags/yes", "true"),
        ("/org/example/flags/no", "false"),
        ("/org/example/lists/empty", "@as []"),
        ("/org/example/lists/strings", "['a', 'b', 'c']"),
        ("/org/example/lists/ints", "[1, 2, 3]"),
        ("/org/example/lists/uints", "[uint32 1, 2]"),
        ("/org/example/lists/nested", "[['a'], @as []]"),
        ("/org/example/lists/empty-dict", "@a{sv} {}"),
        ("/org/example/dicts/sv", "{'width': <800>, 'title': <'x'>, 'tags': <['a']>}"),
        ("/org/example/dicts/ss", "{'a': 'b'}"),
        ("/org/example/dicts/ui", "{uint32 1: 2}"),
        ("/org/example/tuples/simple", "(1, 'two', 3.0)"),
        ("/org/example/tuples/nested", "((1, 2), [(true, 'x')])"),
        ("/org/example/variants/int", "<42>"),
        ("/org/example/variants/nested", "<<int64 3>>"),
        ("/org/example/variants/list", "[<1>, <'a'>]"),
        ("/org/example/bytes/ascii", "b'hello'"),
        ("/org/example/bytes/escaped", "b'a\\nb\\x01'"),
        ("/org/example/bytes/array", "[byte 0x00, 0xff]"),
        ("/org/example/paths/object", "objectpath '/org/example'"),
        ("/org/example/paths/signature", "signature 'a{sv}'"),
        ("/top-level", "1"),
        ("/org/example.app/dotted", "'dot'"),
    ]

    /// Runs `body` with a private dconf database, a test bus whose daemon activates `dconf-service` for it,
    /// and a broker on that bus; `dconf` runs the dconf tool against that database.
    static func withPrivateDconf(
        _ body: (_ bus: TestBus, _ dconf: (_ arguments: [String], _ input: String?) async throws -> String)
            async throws -> Void
    ) async throws {
        for tool in [Self.dconf, Self.dconfService] {
            guard FileManager.default.isExecutableFile(atPath: tool) else {
                Issue.record("\(tool) is missing: install it with: apt-get install -y dconf-cli dconf-service")
                return
            }
        }
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("settingsctl-dconf-\(UUID())")
        let config = home.appendingPathComponent("config")
        let runtime = home.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let profile = home.appendingPathComponent("profile")
        try "user-db:user\n".write(to: profile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: home) }
        let isolation = [
            "HOME": home.path, "XDG_CONFIG_HOME": config.path, "XDG_RUNTIME_DIR": runtime.path,
            "DCONF_PROFILE": profile.path,
        ]

        try await withTestBus(environment: isolation) { bus in
            let service = try ActivatedService.install(
                name: "ca.desrt.dconf", command: [Self.dconfService], on: bus, in: home)
            let broker = try await TestBroker.start(on: bus)
            let environment = bus.environment.merging(isolation) { _, new in new }
            func dconf(_ arguments: [String], input: String?) async throws -> String {
                let result = try await TestProcess.run(Self.dconf, arguments, environment: environment, input: input)
                #expect(result.status == 0, "dconf \(arguments.joined(separator: " ")): \(result.stderr)")
                return result.stdout
            }
            do {
                try await body(bus, dconf)
                #expect(FileManager.default.fileExists(atPath: config.appendingPathComponent("dconf/user").path))
            } catch {
                try await service.stop(on: bus)
                _ = await broker.stop()
                throw error
            }
            try await service.stop(on: bus)
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aDconfDumpLoadsUnchangedWithItsTypes() async throws {
        try await Self.withPrivateDconf { bus, dconf in
            // Given: a dconf database holding values of every kind.
            for (key, text) in Self.values {
                _ = try await dconf(["write", key, text], nil)
            }
            let dconfDump = try await dconf(["dump", "/"], nil)
            #expect(dconfDump.contains("uint64=uint64 18446744073709551615\n"), "\(dconfDump)")

            // When: its dump is loaded.
            #expect(try await Ctl.output(bus, ["load", "/"], input: dconfDump) == "")

            // Then: settingsctl dumps exactly what dconf dumped, and reads each key as dconf reads it.
            let ourDump = try await Ctl.output(bus, ["dump", "/"])
            #expect(ourDump == dconfDump)
            for (key, _) in Self.values {
                let theirs = try await dconf(["read", key], nil)
                let ours = try await Ctl.output(bus, ["get", key])
                #expect(ours == theirs, "\(key)")
            }
            // And a subtree loads the same way, relative to its directory.
            let subtree = try await dconf(["dump", "/org/example/"], nil)
            #expect(try await Ctl.output(bus, ["load", "/copy/"], input: subtree) == "")
            #expect(try await Ctl.output(bus, ["dump", "/copy/"]) == subtree)

            // And our dump loads back into dconf unchanged.
            _ = try await dconf(["reset", "-f", "/"], nil)
            #expect(try await dconf(["dump", "/"], nil) == "")
            _ = try await dconf(["load", "/"], ourDump)
            #expect(try await dconf(["dump", "/"], nil) == dconfDump)
        }
    }

    enum Theme: String, SettingValue, Sendable { case light, dark }

    /// The migration path of docs/scripting.md, `dconf dump / | settingsctl load /`, ends with every value
    /// readable by an app that declares its keys with natural Swift types: dconf writes `int32`, `uint32` and
    /// bytes where the app says `Int`, and an integer where it says `Double`.
    @Test func aDconfDumpLoadedIsReadThroughTypedKeysWithNoValueLost() async throws {
        let fontSize = SettingKey<Int>("/org/example/app/font-size", default: 11)
        let launches = SettingKey<Int>("/org/example/app/launches", default: 0)
        let level = SettingKey<Int>("/org/example/app/level", default: 0)
        let zoom = SettingKey<Double>("/org/example/app/zoom", default: 1)
        let scale = SettingKey<Double>("/org/example/app/scale", default: 1)
        let name = SettingKey<String>("/org/example/app/name", default: "")
        let recent = SettingKey<[String]>("/org/example/app/recent", default: [])
        let theme = SettingKey<Theme>("/org/example/app/theme", default: .light)
        let enabled = SettingKey<Bool>("/org/example/app/enabled", default: false)
        try await Self.withPrivateDconf { bus, dconf in
            // Given: values as dconf users write them, with dconf's own types.
            for (key, text) in [
                (fontSize.path, "14"), (launches.path, "uint32 7"), (level.path, "byte 0x03"), (zoom.path, "2"),
                (scale.path, "1.25"), (name.path, "'Ada'"), (recent.path, "['a.txt', 'b.txt']"),
                (theme.path, "'dark'"), (enabled.path, "true"),
            ] {
                _ = try await dconf(["write", key.rawValue, text], nil)
            }
            // When: the dump is loaded, and the app registers its keys and reads them.
            #expect(try await Ctl.output(bus, ["load", "/"], input: try await dconf(["dump", "/"], nil)) == "")
            let settings = BusSettingsStore(bus: .address(bus.address))
            try await settings.register(fontSize, launches, level, zoom, scale, name, recent, theme, enabled)

            // Then: every value reads as written, none is set aside, and scripts read the converted types.
            #expect(try await settings.get(fontSize) == 14)
            #expect(try await settings.get(launches) == 7)
            #expect(try await settings.get(level) == 3)
            #expect(try await settings.get(zoom) == 2)
            #expect(try await settings.get(scale) == 1.25)
            #expect(try await settings.get(name) == "Ada")
            #expect(try await settings.get(recent) == ["a.txt", "b.txt"])
            #expect(try await settings.get(theme) == .dark)
            #expect(try await settings.get(enabled) == true)
            for path in [fontSize.path, launches.path, level.path, zoom.path, scale.path, name.path, recent.path] {
                let description = try await settings.describe(path)
                #expect(description.problem == nil, "\(path): \(description.problem ?? "")")
            }
            #expect(try await Ctl.output(bus, ["get", fontSize.path.rawValue]) == "int64 14\n")
            #expect(try await Ctl.output(bus, ["get", zoom.path.rawValue]) == "2.0\n")
        }
    }
}
