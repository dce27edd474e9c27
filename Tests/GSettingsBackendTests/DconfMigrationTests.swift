// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The move from dconf of docs/gsettings.md ("Moving from dconf, and back"), with every key of the GSettings
/// schemas Debian ships (`gsettings-desktop-schemas`) and a schema of the types GNOME's keys do not use:
/// a real dconf database (`dconf-service` activated on a private bus, its files in a temporary folder), the
/// documented commands run as written, a real broker with those schemas, and every key read back by
/// `gsettings` through dconf and through the `settingsbus` module.
@Suite(.sharingTheMachine, .timeLimit(.minutes(5)))
struct DconfMigrationTests {
    static let dconf = "/usr/bin/dconf"
    static let dconfService = "/usr/libexec/dconf-service"
    static let gsettingsTool = "/usr/bin/gsettings"
    static let debianSchemas = "/usr/share/glib-2.0/schemas"

    /// The documented commands, run by `/bin/sh` as they are written in docs/gsettings.md.
    static let moveCommand = "dconf dump / | settingsctl load /"
    static let backCommand = "settingsctl dump --user-values / | dconf load /"

    /// Types the schemas Debian ships do not use: maybes (set to `just` and to `nothing`), a pair of doubles, byte
    /// strings, every integer width, dictionaries, a variant.
    static let otherTypes = """
        <schemalist>
          <enum id="org.example.Migration.Mode">
            <value nick="plain" value="0"/>
            <value nick="fancy" value="1"/>
          </enum>
          <flags id="org.example.Migration.Parts">
            <value nick="head" value="1"/>
            <value nick="tail" value="2"/>
          </flags>
          <schema id="org.example.Migration" path="/org/example/migration/">
            <key name="maybe-string" type="ms"><default>nothing</default></key>
            <key name="maybe-set" type="ms"><default>'set'</default></key>
            <key name="maybe-uint" type="mu"><default>nothing</default></key>
            <key name="maybe-bool" type="mb"><default>just false</default></key>
            <key name="maybe-pair" type="m(ii)"><default>nothing</default></key>
            <key name="point" type="(dd)"><default>(0.0, 0.0)</default></key>
            <key name="bytes" type="ay"><default>b''</default></key>
            <key name="byte" type="y"><default>0</default></key>
            <key name="int16" type="n"><default>0</default><range min="-10" max="10"/></key>
            <key name="uint16" type="q"><default>0</default></key>
            <key name="int64" type="x"><default>0</default></key>
            <key name="uint64" type="t"><default>0</default></key>
            <key name="uint32" type="u"><default>5</default><range min="1" max="9"/></key>
            <key name="pairs" type="a(ss)"><default>[]</default></key>
            <key name="map" type="a{ss}"><default>{}</default></key>
            <key name="options" type="a{sv}"><default>{}</default></key>
            <key name="list-of-lists" type="aas"><default>[]</default></key>
            <key name="mode" enum="org.example.Migration.Mode"><default>'plain'</default></key>
            <key name="parts" flags="org.example.Migration.Parts"><default>[]</default></key>
            <key name="words" type="as">
              <choices><choice value="one"/><choice value="two"/></choices>
              <default>['one']</default>
            </key>
          </schema>
        </schemalist>
        """

    struct Unexpected: Error, CustomStringConvertible {
        var description: String
    }

    /// One key of a GSettings schema with a path, and a value for it that differs from its default.
    struct Key {
        var schemaID: String
        var name: String
        var path: SettingPath
        /// The value, in GVariant text with type annotations, as `dconf dump` prints it.
        var text: String
    }

    /// The keys of every schema source in `folder` that places them, each with a value of its type that differs
    /// from its default, lies in its range and is one of its choices (a subset of its flags' nicks).
    static func keysWithValues(in folder: URL) throws -> [Key] {
        var sources: [GSettingsSchemas.Source] = []
        var overrides: [GSettingsSchemas.OverrideFile] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        where name.hasSuffix(".xml") || name.hasSuffix(".override") {
            let text = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            if name.hasSuffix(".gschema.override") {
                overrides.append(GSettingsSchemas.OverrideFile(file: name, folder: 0, text: text))
            } else if name.hasSuffix(".gschema.xml") || name.hasSuffix(".enums.xml") {
                sources.append(
                    GSettingsSchemas.Source(file: name, folder: 0, content: try GSettingsSchemaFile(parsing: text)))
            }
        }
        let converted = GSettingsSchemas(sources: sources, overrides: overrides)
        #expect(converted.problems.isEmpty, "\(converted.problems)")
        var schemas: [SettingPath: SettingSchema] = [:]
        for file in converted.files { schemas.merge(file.schemas) { first, _ in first } }
        var nicks: [String: [String]] = [:]
        for source in sources {
            for enumeration in source.content.enumerations { nicks[enumeration.id] = enumeration.nicks }
        }

        var byID: [String: GSettingsSchemaFile.Schema] = [:]
        for source in sources {
            for schema in source.content.schemas { byID[schema.id] = schema }
        }
        // Each schema with a path, and each relocatable schema a <child> places below one.
        var placed: [(schema: GSettingsSchemaFile.Schema, path: String)] = byID.values.compactMap { schema in
            schema.path.map { (schema, $0) }
        }
        var index = 0
        while index < placed.count {
            for child in placed[index].schema.children {
                if let target = byID[child.schema], target.path == nil {
                    placed.append((target, placed[index].path + child.name + "/"))
                }
            }
            index += 1
        }
        var keys: [Key] = []
        for (schema, path) in placed.sorted(by: { $0.path < $1.path }) {
            #expect(schema.extends == nil, "\(schema.id) extends \(schema.extends ?? "")")
            for key in schema.keys {
                let settingPath = try SettingPath(path + key.name)
                let registered = try #require(schemas[settingPath], "\(settingPath) is not placed")
                let text: String
                switch key.kind {
                case .flags(let id):
                    let all = try #require(nicks[id])
                    let value = DBusValue.array(.string, [.string(all.last!)])
                    text = GVariantText.format(value == registered.defaultValue ? .array(.string, []) : value)
                case .type(let type) where type.hasPrefix("m"):
                    guard case .array(let element) = registered.type else {
                        throw Unexpected(description: "\(settingPath) of type \(type) is registered as \(registered.type)")
                    }
                    text =
                        registered.defaultValue == .array(element, [])
                        ? "@\(type) \(GVariantText.format(sample(element, key.name), annotateTypes: false))"
                        : "@\(type) nothing"
                default:
                    var value = differentValue(registered, key.name)
                    if registered.type == .array(.string), let choices = key.choices?.values {
                        let one = DBusValue.array(.string, [.string(choices.last!)])
                        value = one == registered.defaultValue ? .array(.string, []) : one
                    }
                    text = GVariantText.format(value)
                }
                keys.append(Key(schemaID: schema.id, name: key.name, path: settingPath, text: text))
            }
        }
        #expect(keys.count == converted.keyCount, "\(keys.count) keys here, \(converted.keyCount) placed by the broker's reading")
        return keys
    }

    /// A value of the schema's type other than its default, within its range and among its choices.
    static func differentValue(_ schema: SettingSchema, _ name: String) -> DBusValue {
        var candidates: [DBusValue] = []
        if let choices = schema.choices { candidates = choices }
        if let range = schema.range { candidates = [range.max, range.min] }
        if case .boolean(let flag)? = schema.defaultValue { candidates = [.boolean(!flag)] }
        candidates += [sample(schema.type, name), empty(schema.type)].compactMap { $0 }
        return candidates.first { $0 != schema.defaultValue }!
    }

    /// A value of any type, none of them a GNOME default: strings with a quote and non-ASCII letters.
    static func sample(_ type: DBusType, _ name: String) -> DBusValue {
        switch type {
        case .byte: return .byte(7)
        case .boolean: return .boolean(true)
        case .int16: return .int16(-3)
        case .uint16: return .uint16(3)
        case .int32: return .int32(-7)
        case .uint32: return .uint32(7)
        case .int64: return .int64(-9_000_000_000)
        case .uint64: return .uint64(18_000_000_000)
        case .double: return .double(2.75)
        case .string: return .string("moved \(name): it's “é”")
        case .objectPath: return .objectPath("/org/example/moved")
        case .signature: return .signature(try! Signature("a{sv}"))
        case .variant: return .variant(.int32(1))
        case .array(.byte): return .array(.byte, Array("bytes\n".utf8).map(DBusValue.byte))
        case .array(let element): return .array(element, [sample(element, name), sample(element, "second")])
        case .dictionary(let key, let value):
            return .dictionary(key: key, value: value, [DBusDictEntry(key: sample(key, name), value: sample(value, name))])
        case .structure(let fields): return .structure(fields.map { sample($0, name) })
        }
    }

    /// An empty value of a container type.
    static func empty(_ type: DBusType) -> DBusValue? {
        switch type {
        case .array(let element): return .array(element, [])
        case .dictionary(let key, let value): return .dictionary(key: key, value: value, [])
        default: return nil
        }
    }

    /// A keyfile for `dconf load /` that sets every key.
    static func keyfile(_ keys: [Key]) -> String {
        var groups: [String: [String]] = [:]
        for key in keys {
            let path = key.path.rawValue
            let slash = path.lastIndex(of: "/")!
            groups[String(path[path.index(after: path.startIndex)..<slash]), default: []].append("\(key.name)=\(key.text)")
        }
        return groups.keys.sorted().map { "[\($0)]\n" + groups[$0]!.joined(separator: "\n") + "\n" }.joined(separator: "\n")
    }

    /// `gsettings list-recursively`'s lines, `schema key value`, as values by `schema key`.
    static func listing(_ output: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3 else { continue }
            values["\(parts[0]) \(parts[1])"] = String(parts[2])
        }
        return values
    }

    /// A private dconf database, a folder of GSettings schemas (Debian's and ``otherTypes``), compiled for
    /// gsettings and read by the broker, and a folder of GIO modules holding the built backend.
    struct Setup {
        let home: URL
        var config: URL { home.appendingPathComponent("config") }
        var data: URL { home.appendingPathComponent("data") }
        var gsettingsFolder: URL { data.appendingPathComponent("glib-2.0/schemas") }
        var modules: URL { home.appendingPathComponent("modules") }
        var brokerArguments: [String] { ["--schema-dir", data.appendingPathComponent("settingsbus/schemas").path] }

        init() async throws {
            home = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-migration-\(UUID())")
            let manager = FileManager.default
            for folder in ["config", "data-home", "data/settingsbus/schemas", "data/glib-2.0/schemas", "modules"] {
                try manager.createDirectory(at: home.appendingPathComponent(folder), withIntermediateDirectories: true)
            }
            try manager.createDirectory(
                at: home.appendingPathComponent("runtime"), withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            try "user-db:user\n".write(to: home.appendingPathComponent("profile"), atomically: true, encoding: .utf8)
            for name in try manager.contentsOfDirectory(atPath: DconfMigrationTests.debianSchemas)
            where name.hasSuffix(".xml") || name.hasSuffix(".override") {
                try manager.copyItem(
                    atPath: DconfMigrationTests.debianSchemas + "/" + name,
                    toPath: gsettingsFolder.appendingPathComponent(name).path)
            }
            try DconfMigrationTests.otherTypes.write(
                to: gsettingsFolder.appendingPathComponent("org.example.Migration.gschema.xml"), atomically: true,
                encoding: .utf8)
            try manager.createSymbolicLink(
                atPath: modules.appendingPathComponent("libsettingsbus-gio.so").path,
                withDestinationPath: try BuiltProduct.path("libsettingsbus-gio.so"))
            let compiled = try await TestProcess.run("/usr/bin/glib-compile-schemas", [gsettingsFolder.path])
            #expect(compiled.status == 0, "\(compiled.stderr)")
        }

        /// dconf's files, the XDG folders and the GSettings schemas of this setup, never the user's.
        var isolation: [String: String] {
            [
                "HOME": home.path, "XDG_CONFIG_HOME": config.path,
                "XDG_RUNTIME_DIR": home.appendingPathComponent("runtime").path,
                "XDG_DATA_HOME": home.appendingPathComponent("data-home").path, "XDG_DATA_DIRS": data.path,
                "DCONF_PROFILE": home.appendingPathComponent("profile").path, "GSETTINGS_SCHEMA_DIR": gsettingsFolder.path,
            ]
        }

        /// The environment of the commands: the bus, the isolation, the built `settingsctl` on `PATH`, and
        /// GSettings apps on `backend` (with the module's folder for `settingsbus`).
        func environment(_ bus: TestBus, backend: String = "dconf") throws -> [String: String] {
            let built = URL(fileURLWithPath: try BuiltProduct.path("settingsctl")).deletingLastPathComponent().path
            var environment = bus.environment.merging(isolation) { _, new in new }
            environment["PATH"] = "\(built):/usr/bin:/bin"
            environment["GSETTINGS_BACKEND"] = backend
            if backend == "settingsbus" { environment["GIO_EXTRA_MODULES"] = modules.path }
            return environment
        }

        func remove() { try? FileManager.default.removeItem(at: home) }
    }

    /// Runs `body` with a private bus whose daemon activates `dconf-service` on the setup's database, and a
    /// broker on it that has registered every key of the setup's GSettings schemas (`keyCount`).
    static func withDconfAndBroker(
        _ setup: Setup, keyCount: Int, _ body: (TestBus, DBusConnection) async throws -> Void
    ) async throws {
        for tool in [dconf, dconfService, gsettingsTool] {
            try #require(
                FileManager.default.isExecutableFile(atPath: tool),
                "\(tool) is missing: apt-get install -y dconf-cli dconf-service libglib2.0-bin")
        }
        try await withTestBus(environment: setup.isolation) { bus in
            let service = try ActivatedService.install(
                name: "ca.desrt.dconf", command: [dconfService], on: bus, in: setup.home)
            let broker = try await TestBroker.start(on: bus, arguments: setup.brokerArguments)
            let connection = try await bus.connect()
            do {
                try await waitUntilRegistered(keyCount, connection)
                try await body(bus, connection)
            } catch {
                await connection.close()
                try await service.stop(on: bus)
                _ = await broker.stop()
                throw error
            }
            await connection.close()
            try await service.stop(on: bus)
            #expect(await broker.stop() == 0)
        }
    }

    /// Waits until the broker has registered at least `count` schemas: its `Status`, then again at each
    /// `DescriptionChanged` (subscribed to before the first look), for at most 60 seconds.
    static func waitUntilRegistered(_ count: Int, _ connection: DBusConnection) async throws {
        let rule = MatchRule(
            sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "DescriptionChanged")
        let signals = Collector(try await connection.signals(matching: rule))
        defer { signals.stop() }
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            guard case .dictionary(_, _, let entries)? = try await connection.settings("Status").first else {
                throw Unexpected(description: "Status is not a dictionary")
            }
            let schemas = entries.first { $0.key == .string("schemas") }?.value
            switch schemas {
            case .variant(.uint32(let registered))? where registered >= count: return
            case .variant(.uint64(let registered))? where registered >= count: return
            default: break
            }
            _ = try await signals.next(timeLimit: max(.zero, deadline - ContinuousClock.now))
        }
    }

    static func run(
        _ executable: String, _ arguments: [String], _ environment: [String: String], input: String? = nil
    ) async throws -> TestProcess.Result {
        try await TestProcess.run(executable, arguments, environment: environment, input: input, timeLimit: .seconds(120))
    }

    /// Runs a documented command line with `/bin/sh`, expecting status 0 and nothing on standard error.
    static func shell(_ command: String, _ environment: [String: String]) async throws -> String {
        let result = try await run("/bin/sh", ["-c", command], environment)
        #expect(result.status == 0 && result.stderr.isEmpty, "\(command): status \(result.status): \(result.stderr)")
        return result.stdout
    }

    /// Every key's value as `gsettings list-recursively` reads it.
    static func gsettingsValues(_ environment: [String: String]) async throws -> [String: String] {
        let listed = try await run(gsettingsTool, ["list-recursively"], environment)
        #expect(listed.status == 0 && !listed.stderr.contains("settingsbus:"), "\(listed.stderr)")
        return listing(listed.stdout)
    }

    @Test func everyGnomeKeyMovesFromDconfToTheBrokerAndBackWithItsValue() async throws {
        let setup = try await Setup()
        defer { setup.remove() }
        let keys = try Self.keysWithValues(in: setup.gsettingsFolder)
        let gnomeKeys = keys.filter { !$0.path.rawValue.hasPrefix("/org/example/") }
        #expect(gnomeKeys.count >= 354, "\(gnomeKeys.count) GNOME keys")

        try await Self.withDconfAndBroker(setup, keyCount: keys.count) { bus, connection in
            let onDconf = try setup.environment(bus)
            let onBroker = try setup.environment(bus, backend: "settingsbus")
            let defaults = try await Self.gsettingsValues(try setup.environment(bus, backend: "memory"))

            // Given: a dconf database holding a value other than its default for every key.
            _ = try await Self.run(Self.dconf, ["load", "/"], onDconf, input: Self.keyfile(keys))
            let inDconf = try await Self.gsettingsValues(onDconf)
            for key in keys {
                let name = "\(key.schemaID) \(key.name)"
                #expect(inDconf[name] != nil && inDconf[name] != defaults[name], "\(name): dconf gives GSettings \(inDconf[name] ?? "nothing"), the default")
            }
            let dump = try await Self.shell("dconf dump /", onDconf)
            #expect(dump.contains("maybe-string=@ms \"moved maybe-string") && dump.contains("maybe-set=@ms nothing"), "\(dump)")

            // When: the documented command moves it into the broker.
            _ = try await Self.shell(Self.moveCommand, onDconf)

            // Then: every key reads through the module what it read through dconf.
            let moved = try await connection.settings("ReadTree", [.string("/")])
            let throughModule = try await Self.gsettingsValues(onBroker)
            var compared = 0
            for key in keys {
                let name = "\(key.schemaID) \(key.name)"
                #expect(throughModule[name] == inDconf[name], "\(name): \(throughModule[name] ?? "nothing") through the broker, \(inDconf[name] ?? "nothing") through dconf")
                compared += 1
            }
            // And: the broker holds each as a user value of its registered type (a maybe as an array).
            #expect(try await Self.source("/org/example/migration/maybe-string", connection) == "user")
            #expect(
                try await GSettingsBackendTests.get("/org/example/migration/maybe-set", connection) == .array(.string, []))
            #expect(try await GSettingsBackendTests.get("/org/example/migration/uint32", connection) == .uint32(9))
            print("dconf → broker: \(keys.count) keys moved (\(gnomeKeys.count) of GNOME's), \(compared) compared; ReadTree holds \(Self.count(moved))")

            // When: the way back, into a dconf database emptied first.
            _ = try await Self.run(Self.dconf, ["reset", "-f", "/"], onDconf)
            #expect(try await Self.shell("dconf dump /", onDconf) == "")
            _ = try await Self.shell(Self.backCommand, onDconf)

            // Then: dconf holds the same keys as before, and GSettings reads every key as it did.
            #expect(try await Self.shell("dconf dump /", onDconf) == dump)
            let back = try await Self.gsettingsValues(onDconf)
            var comparedBack = 0
            for key in keys {
                let name = "\(key.schemaID) \(key.name)"
                #expect(back[name] == inDconf[name], "\(name): \(back[name] ?? "nothing") back in dconf, \(inDconf[name] ?? "nothing") before")
                comparedBack += 1
            }
            print("broker → dconf: \(comparedBack) keys compared")
        }
    }

    @Test func aKeyTheBrokerRefusesIsNamedAndTheLoadFails() async throws {
        let setup = try await Setup()
        defer { setup.remove() }
        let keys = try Self.keysWithValues(in: setup.gsettingsFolder)
        try await Self.withDconfAndBroker(setup, keyCount: keys.count) { bus, connection in
            let onDconf = try setup.environment(bus)
            // Given: dconf holds a value out of a GNOME key's range (dconf checks no schema), a key at a path the
            // broker's grammar refuses ('@'), and a good value.
            _ = try await Self.run(
                Self.dconf, ["load", "/"], onDconf,
                input: """
                    [org/gnome/desktop/interface]
                    color-scheme='prefer-dark'

                    [org/gnome/desktop/peripherals/mouse]
                    speed=5.0

                    [org/gnome/shell/extensions/app@example.org]
                    mode='compact'

                    """)

            // When: the documented command runs. Then: it fails, naming both keys, and writes nothing.
            let refused = try await Self.run("/bin/sh", ["-c", Self.moveCommand], onDconf)
            #expect(refused.status == 4, "\(refused.status): \(refused.stderr)")
            #expect(refused.stderr.contains("2 keys cannot be stored, nothing was written"), "\(refused.stderr)")
            #expect(refused.stderr.contains("out of range -1.0…1.0 for /org/gnome/desktop/peripherals/mouse/speed"), "\(refused.stderr)")
            #expect(refused.stderr.contains("/org/gnome/shell/extensions/app@example.org/mode is not a key the broker can store"), "\(refused.stderr)")
            #expect(try await Self.source("/org/gnome/desktop/interface/color-scheme", connection) == "schema")

            // When: the others are asked for. Then: they are written, the two still named, the status still 4.
            let partial = try await Self.run("/bin/sh", ["-c", "dconf dump / | settingsctl load --skip-refused /"], onDconf)
            #expect(partial.status == 4, "\(partial.status): \(partial.stderr)")
            #expect(partial.stderr.contains("2 keys cannot be stored, the 1 other key was written"), "\(partial.stderr)")
            #expect(partial.stderr.contains("/org/gnome/desktop/peripherals/mouse/speed"), "\(partial.stderr)")
            #expect(
                try await GSettingsBackendTests.get("/org/gnome/desktop/interface/color-scheme", connection)
                    == .string("prefer-dark"))

            // And: the check of docs/gsettings.md: a gsettings set is in settingsctl log, gsettings its writer.
            let onBroker = try setup.environment(bus, backend: "settingsbus")
            let set = try await Self.run(
                Self.gsettingsTool, ["set", "org.gnome.desktop.interface", "color-scheme", "'prefer-light'"], onBroker)
            #expect(set.status == 0 && set.stderr.isEmpty, "\(set.stderr)")
            let log = try await Self.shell("settingsctl log /org/gnome/desktop/interface/color-scheme", onBroker)
            #expect(log.contains("gsettings") && log.contains("'prefer-dark' → 'prefer-light'"), "\(log)")
        }
    }

    /// Where the value `Get` returns comes from (`Describe`'s `source`).
    static func source(_ key: String, _ connection: DBusConnection) async throws -> String? {
        let fields = try await GSettingsSchemaSourceTests.describe(key, connection)
        guard case .string(let source)? = fields["source"] else { return nil }
        return source
    }

    static func count(_ reply: [DBusValue]) -> Int {
        guard case .dictionary(_, _, let entries)? = reply.first else { return 0 }
        return entries.count
    }
}
