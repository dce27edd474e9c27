// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The broker reads GNOME's GSettings schema sources (`glib-2.0/schemas/*.gschema.xml` beside its schema folder
/// `settingsbus/schemas` in an XDG data folder) and holds every writer to them: `gdbus`, `dbus-send`, a Swift
/// app and GSettings apps through the `settingsbus` module.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct GSettingsSchemaSourceTests {
    static let shapes = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE schemalist SYSTEM "gschema.dtd">
        <schemalist gettext-domain="shapes">
          <enum id="org.example.Shapes.Mode">
            <value nick="flat" value="0"/>
            <value nick="round" value="1"/>
          </enum>
          <schema id="org.example.Shapes" path="/org/example/shapes/">
            <key name="size" type="i">
              <default>4</default>
              <range min="1" max="10"/>
              <summary>Shape size</summary>
              <description>
                How large   shapes are drawn,
                in steps &amp; grades.
              </description>
            </key>
            <key name="colour" type="s">
              <choices>
                <choice value="red"/>
                <choice value="blue"/>
              </choices>
              <default l10n="messages">'red'</default>
            </key>
            <key name="mode" enum="org.example.Shapes.Mode">
              <default>'flat'</default>
            </key>
          </schema>
          <schema id="org.example.Shapes.Relocatable">
            <key name="loose" type="b">
              <default>true</default>
            </key>
          </schema>
        </schemalist>
        """

    /// An XDG data folder: `settingsbus/schemas` for the broker's `--schema-dir`, `glib-2.0/schemas` beside it.
    struct DataFolder {
        let folder: URL
        var schemaFolder: URL { folder.appendingPathComponent("settingsbus/schemas") }
        var gsettingsFolder: URL { folder.appendingPathComponent("glib-2.0/schemas") }
        var arguments: [String] { ["--schema-dir", schemaFolder.path] }

        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-gschema-\(UUID())")
            try FileManager.default.createDirectory(at: schemaFolder, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: gsettingsFolder, withIntermediateDirectories: true)
        }

        /// Writes a file as a package manager does: to a temporary name, then renamed into place.
        func install(_ text: String, as name: String) throws {
            let temporary = gsettingsFolder.appendingPathComponent(".\(name).tmp")
            try text.write(to: temporary, atomically: false, encoding: .utf8)
            try #require(rename(temporary.path, gsettingsFolder.appendingPathComponent(name).path) == 0, "errno \(errno)")
        }

        func remove() { try? FileManager.default.removeItem(at: folder) }

        /// Compiles the GSettings folder for `gsettings`, as a package's install does, and links the built module
        /// into a folder of GIO modules.
        func compileForGSettings() async throws {
            let compiled = try await TestProcess.run("/usr/bin/glib-compile-schemas", [gsettingsFolder.path])
            #expect(compiled.status == 0, "\(compiled.stderr)")
            try FileManager.default.createDirectory(at: modules, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(
                atPath: modules.appendingPathComponent("libsettingsbus-gio.so").path,
                withDestinationPath: try BuiltProduct.path("libsettingsbus-gio.so"))
        }

        /// The folder of GIO modules that holds the built module (``compileForGSettings()``).
        var modules: URL { folder.appendingPathComponent("modules") }

        /// The environment of a GSettings app on `bus` that stores through the broker, with `more`.
        func environment(_ bus: TestBus, _ more: [String: String] = [:]) -> [String: String] {
            bus.environment.merging(
                [
                    "GSETTINGS_BACKEND": "settingsbus", "GIO_EXTRA_MODULES": modules.path,
                    "GSETTINGS_SCHEMA_DIR": gsettingsFolder.path,
                ].merging(more) { _, new in new }
            ) { _, new in new }
        }
    }

    static func describe(_ key: String, _ connection: DBusConnection) async throws -> [String: DBusValue] {
        let reply = try await connection.settings("Describe", [.string(key)])
        guard case .dictionary(.string, .variant, let entries)? = reply.first else { return [:] }
        var fields: [String: DBusValue] = [:]
        for entry in entries {
            if case .string(let name) = entry.key, case .variant(let value) = entry.value { fields[name] = value }
        }
        return fields
    }

    static func gdbusSet(_ bus: TestBus, _ key: String, _ value: String) async throws -> TestProcess.Result {
        try await TestProcess.run(
            "/usr/bin/gdbus",
            [
                "call", "--session", "--dest", "io.github.settingsbus.Settings1", "--object-path",
                "/io/github/settingsbus/Settings1", "--method", "io.github.settingsbus.Settings1.Set", key, value,
            ], environment: bus.environment)
    }

    static func dbusSendSet(_ bus: TestBus, _ key: String, _ value: String) async throws -> TestProcess.Result {
        try await TestProcess.run(
            "/usr/bin/dbus-send",
            [
                "--session", "--print-reply", "--dest=io.github.settingsbus.Settings1", "/io/github/settingsbus/Settings1",
                "io.github.settingsbus.Settings1.Set", "string:\(key)", value,
            ], environment: bus.environment)
    }

    static let outOfRange = "io.github.settingsbus.Settings1.Error.OutOfRange"

    @Test func aGnomeSchemasRangeAndChoicesHoldForEveryWriterAndDescribeShowsItsText() async throws {
        let data = try DataFolder()
        defer { data.remove() }
        try data.install(Self.shapes, as: "org.example.Shapes.gschema.xml")
        try await data.compileForGSettings()

        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: data.arguments)
            // GNOME's sources are read just after the name is taken.
            try await broker.waitForLog(containing: "read the GSettings schemas")
            let connection = try await bus.connect()

            // Describe shows GNOME's summary and description (white space collapsed, entities read), the range,
            // the choices and the enumeration's nicks.
            let size = try await Self.describe("/org/example/shapes/size", connection)
            #expect(size["registered"] == .boolean(true))
            #expect(size["summary"] == .string("Shape size"))
            #expect(size["description"] == .string("How large shapes are drawn, in steps & grades."))
            #expect(size["default"] == .int32(4))
            let colour = try await Self.describe("/org/example/shapes/colour", connection)
            #expect(colour["choices"] == .array(.string, [.string("red"), .string("blue")]))
            let mode = try await Self.describe("/org/example/shapes/mode", connection)
            #expect(mode["choices"] == .array(.string, [.string("flat"), .string("round")]))
            #expect(mode["signature"] == .string("s"))

            // gdbus and dbus-send: out of range, not among the choices, not a nick: refused by name.
            let big = try await Self.gdbusSet(bus, "/org/example/shapes/size", "<50>")
            #expect(big.status != 0 && big.stderr.contains(Self.outOfRange), "\(big.stderr)")
            let green = try await Self.dbusSendSet(bus, "/org/example/shapes/colour", "variant:string:green")
            #expect(green.status != 0 && green.stderr.contains(Self.outOfRange), "\(green.stderr)")
            let square = try await Self.gdbusSet(bus, "/org/example/shapes/mode", "<'square'>")
            #expect(square.stderr.contains(Self.outOfRange), "\(square.stderr)")
            // A Swift app: the same.
            await #expect(throws: DBusError.self) {
                _ = try await connection.settings("Set", [.string("/org/example/shapes/size"), .variant(.int32(0))])
            }
            #expect(try await connection.settings("Get", [.string("/org/example/shapes/size")]) == [.variant(.int32(4))])
            #expect(try await connection.settings("Get", [.string("/org/example/shapes/colour")]) == [.variant(.string("red"))])

            // A GSettings app through the module writes a value in range; a later gdbus write out of range is
            // refused, and gsettings still reads the value it wrote.
            let environment = data.environment(bus)
            let set = try await TestProcess.run(
                "/usr/bin/gsettings", ["set", "org.example.Shapes", "size", "7"], environment: environment)
            #expect(set.status == 0 && !set.stderr.contains("settingsbus:"), "\(set.stderr)")
            #expect(try await connection.settings("Get", [.string("/org/example/shapes/size")]) == [.variant(.int32(7))])
            let refused = try await Self.gdbusSet(bus, "/org/example/shapes/size", "<11>")
            #expect(refused.stderr.contains(Self.outOfRange), "\(refused.stderr)")
            let read = try await TestProcess.run(
                "/usr/bin/gsettings", ["get", "org.example.Shapes", "size"], environment: environment)
            #expect(read.stdout == "7\n", "\(read.stdout) \(read.stderr)")

            // The relocatable schema's key is not placed (nor a problem); settingsctl-style Status has no problem.
            await #expect(throws: DBusError.self) { _ = try await Self.describe("/org/example/shapes/loose", connection) }
            let status = GVariantText.format(.structure(try await connection.settings("Status")))
            #expect(status.contains("'schema-problems': <@as []>"), "\(status)")
            #expect(broker.log().contains("relocatable-schemas=1"), "\(broker.log())")

            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aSourceWrittenWhileTheBrokerRunsIsFollowedAndABrokenOneListedWithItsLine() async throws {
        let data = try DataFolder()
        defer { data.remove() }
        try data.install(Self.shapes, as: "org.example.Shapes.gschema.xml")
        // The broker's own schema file gives one of the GNOME schema's keys too.
        try "[/org/example/shapes/]\ncolour.type=s\ncolour.default='green'\ncolour.summary=The broker's own\n".write(
            to: data.schemaFolder.appendingPathComponent("shapes.schema"), atomically: true, encoding: .utf8)
        let store = data.folder.appendingPathComponent("settings.db").path
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, storePath: store, arguments: data.arguments)
            // GNOME's sources are read just after the name is taken.
            try await broker.waitForLog(containing: "read the GSettings schemas")
            let connection = try await bus.connect()
            // A key given by both has the broker's own schema; the others are the GNOME schema's.
            let colour = try await Self.describe("/org/example/shapes/colour", connection)
            #expect(colour["summary"] == .string("The broker's own") && colour["choices"] == nil, "\(colour)")
            #expect(try await Self.describe("/org/example/shapes/size", connection)["summary"] == .string("Shape size"))
            let started = try await connection.brokerSerial()
            var rule = MatchRule(
                sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "DescriptionChanged")
            rule.arguments[0] = "/org/example/later/depth"
            let signals = Collector(try await connection.signals(matching: rule))

            // When: a broken source, then a good one, are installed while the broker runs.
            try data.install("<schemalist>\n  <schema id='org.example.Broken' path='/org/example/broken/'>\n    <key name='k' type='i'><default>1</default>\n  </schema>\n</schemalist>\n", as: "org.example.Broken.gschema.xml")
            try data.install(
                """
                <schemalist>
                  <schema id="org.example.Later" path="/org/example/later/">
                    <key name="depth" type="u"><default>3</default><range min="1" max="5"/><summary>Depth</summary></key>
                  </schema>
                </schemalist>
                """, as: "org.example.Later.gschema.xml")

            // Then: the good one is registered (its DescriptionChanged), and enforced.
            _ = try await signals.next(timeLimit: .seconds(10))
            let depth = try await Self.describe("/org/example/later/depth", connection)
            #expect(depth["summary"] == .string("Depth"))
            await #expect(throws: DBusError.self) {
                _ = try await connection.settings("Set", [.string("/org/example/later/depth"), .variant(.uint32(9))])
            }
            // And: the broken one is in Status with its file and line (the </schema> that closes <key>), and in
            // the log; the broker goes on.
            let status = GVariantText.format(.structure(try await connection.settings("Status")))
            #expect(status.contains("org.example.Broken.gschema.xml: line 4: </schema> closes <key>"), "\(status)")
            #expect(broker.log().contains("org.example.Broken.gschema.xml"), "\(broker.log())")
            // And: the unchanged source was not registered again: the one commit is the new file's.
            #expect(try await connection.brokerSerial() == started + 1)

            signals.stop()
            await connection.close()
            #expect(await broker.stop() == 0)

            // When: the broker starts again on the same store and folders: no commit at all.
            let again = try await TestBroker.start(on: bus, storePath: store, arguments: data.arguments)
            // GNOME's sources are read just after the name is taken.
            try await again.waitForLog(containing: "read the GSettings schemas")
            let second = try await bus.connect()
            #expect(try await second.brokerSerial() == started + 1)
            await second.close()
            #expect(await again.stop() == 0)
        }
    }
}
