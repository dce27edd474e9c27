// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// What GSettings decides itself stays GSettings': a key nobody set reads GSettings' own default (here a desktop's
/// override group, which the broker, serving every desktop, does not apply) with `g_settings_get_user_value()`
/// NULL, also after another process resets it; and the broker holds flags, `as` choices and aliases as GSettings
/// does, for every writer.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct GSettingsDefaultsTests {
    static let look = """
        <schemalist>
          <flags id="org.example.Look.Features">
            <value nick="one" value="1"/>
            <value nick="two" value="2"/>
            <value nick="three" value="4"/>
          </flags>
          <schema id="org.example.Look" path="/org/example/look/">
            <key name="size" type="i"><default>4</default></key>
            <key name="features" flags="org.example.Look.Features"><default>['one']</default></key>
            <key name="tags" type="as">
              <choices><choice value="red"/><choice value="blue"/></choices>
              <default>[]</default>
            </key>
            <key name="colour" type="s">
              <choices><choice value="red"/><choice value="blue"/></choices>
              <aliases><alias value="crimson" target="red"/></aliases>
              <default>'blue'</default>
            </key>
          </schema>
        </schemalist>
        """

    /// A python3-gi app on desktop `TestDesk`: it prints `size`'s value and user value, then, for each write given,
    /// makes it with gdbus and prints them again once its `changed` handler ran (or `timeout` after 10 s).
    static let app = """
        import subprocess, sys
        from gi.repository import Gio, GLib
        settings = Gio.Settings.new('org.example.Look')
        def show(label):
            user = settings.get_user_value('size')
            print(label, settings.get_int('size'), 'none' if user is None else user.print_(False), flush=True)
        show('start')
        loop = GLib.MainLoop()
        for label, method, arguments in [('set', 'Set', ['/org/example/look/size', '<8>']),
                                         ('reset', 'Reset', ['/org/example/look/size'])]:
            handler = settings.connect('changed::size', lambda *_: loop.quit())
            timer = GLib.timeout_add_seconds(10, lambda: (print('timeout', flush=True), loop.quit()) and False)
            subprocess.run(['gdbus', 'call', '--session', '--dest', 'io.github.settingsbus.Settings1',
                            '--object-path', '/io/github/settingsbus/Settings1',
                            '--method', 'io.github.settingsbus.Settings1.' + method] + arguments,
                           check=True, stdout=subprocess.DEVNULL)
            loop.run()
            GLib.source_remove(timer) if GLib.main_context_default().find_source_by_id(timer) else None
            settings.disconnect(handler)
            show(label)
        """

    @Test func aKeyNobodySetReadsGSettingsOwnDefaultAndNoUserValueEvenAfterAReset() async throws {
        let data = try GSettingsSchemaSourceTests.DataFolder()
        defer { data.remove() }
        try data.install(Self.look, as: "org.example.Look.gschema.xml")
        try data.install("[org.example.Look:TestDesk]\nsize=6\n", as: "50_testdesk.gschema.override")
        try await data.compileForGSettings()

        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: data.arguments)
            try await broker.waitForLog(containing: "read the GSettings schemas")
            let connection = try await bus.connect()
            // The broker serves every desktop: its default is the schema's.
            #expect(try await connection.settings("Get", [.string("/org/example/look/size")]) == [.variant(.int32(4))])

            let app = try await TestProcess.run(
                "/usr/bin/python3", ["-c", Self.app], environment: data.environment(bus, ["XDG_CURRENT_DESKTOP": "TestDesk"]))
            #expect(app.status == 0, "\(app.stderr)")
            // GSettings' own default for the desktop, and no user value; the other process's write is a user
            // value; after its reset the key is GSettings' default again, with no user value.
            #expect(app.stdout == "start 6 none\nset 8 8\nreset 6 none\n", "\(app.stdout)\(app.stderr)")
            #expect(!app.stderr.contains("settingsbus:"), "\(app.stderr)")

            // A reset key is in both lists of the Changed signal (a client that reads values only still reads
            // the default), and a ReadTreeWithoutSchemaDefaults leaves it out where ReadTree has it.
            let tree = try await connection.settings("ReadTree", [.string("/org/example/look/")])
            #expect(GVariantText.format(tree[0]).contains("'/org/example/look/size': <4>"), "\(tree)")
            let set = try await connection.settings("ReadTreeWithoutSchemaDefaults", [.string("/org/example/look/")])
            #expect(set.first.map { GVariantText.format($0) } == "@a{sv} {}", "\(set)")

            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A data folder with `look` installed and compiled for GSettings.
    static func lookData() async throws -> GSettingsSchemaSourceTests.DataFolder {
        let data = try GSettingsSchemaSourceTests.DataFolder()
        do {
            try data.install(Self.look, as: "org.example.Look.gschema.xml")
            try await data.compileForGSettings()
        } catch {
            data.remove()
            throw error
        }
        return data
    }

    /// An administrator's folder in `data`, with its `defaults.d` and `locks.d`.
    static func administratorFolder(in data: GSettingsSchemaSourceTests.DataFolder) throws -> URL {
        let admin = data.folder.appendingPathComponent("admin")
        for folder in ["defaults.d", "locks.d"] {
            try FileManager.default.createDirectory(
                at: admin.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        return admin
    }

    /// Python's `gdbus(method, *arguments)`: calls a method of the broker with the `gdbus` command (for the apps
    /// below; they import `subprocess`).
    static let pythonGdbus = """
        def gdbus(method, *arguments):
            subprocess.run(['gdbus', 'call', '--session', '--dest', 'io.github.settingsbus.Settings1',
                            '--object-path', '/io/github/settingsbus/Settings1',
                            '--method', 'io.github.settingsbus.Settings1.' + method] + list(arguments),
                           check=True, stdout=subprocess.DEVNULL)
        """

    /// A python3-gi app: it counts the `changed` of `size` that a gdbus `Reset` of it brings before a later change of
    /// `colour` (the broker's signals reach the app in order), and prints the count and the value it then reads.
    static let resetApp = """
        import subprocess
        from gi.repository import Gio, GLib
        settings = Gio.Settings.new('org.example.Look')
        settings.get_int('size')
        \(Self.pythonGdbus)
        loop = GLib.MainLoop()
        counts = {'size': 0, 'colour': 0}
        def changed(_, key):
            if key in counts: counts[key] += 1
            if key == 'colour': loop.quit()
        settings.connect('changed', changed)
        GLib.timeout_add_seconds(20, lambda: (print('timeout', flush=True), loop.quit()) and False)
        gdbus('Set', '/org/example/look/size', '<8>')
        gdbus('Set', '/org/example/look/colour', "<'red'>")
        loop.run()
        counts['size'] = 0
        gdbus('Reset', '/org/example/look/size')
        gdbus('Set', '/org/example/look/colour', "<'blue'>")
        loop.run()
        print('reset', counts['size'], settings.get_int('size'), flush=True)
        """

    /// A reset of a key with a GSettings default reaches an app as one `changed`: the broker's `Changed` lists such
    /// a key both with the value it now serves and as removed, and the module takes it as removed alone (it took
    /// both, and both again from its subscription: four `changed` for one reset).
    @Test func aResetReachesAnAppAsOneChanged() async throws {
        let data = try await Self.lookData()
        defer { data.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: data.arguments)
            try await broker.waitForLog(containing: "read the GSettings schemas")
            let app = try await TestProcess.run("/usr/bin/python3", ["-c", Self.resetApp], environment: data.environment(bus))
            #expect(app.status == 0, "\(app.stderr)")
            #expect(app.stdout == "reset 1 4\n", "\(app.stdout)\(app.stderr)")
            #expect(await broker.stop() == 0)
        }
    }

    /// A python3-gi app: it prints `size`'s value, user value and default value, then for each step (a write by
    /// gdbus, or the administrator's new defaults file, whose path is in ADMIN_DEFAULTS) prints them again once its
    /// `changed` handler ran (or `timeout` after 10 s).
    static let administratorApp = """
        import os, subprocess
        from gi.repository import Gio, GLib
        settings = Gio.Settings.new('org.example.Look')
        def show(label):
            user = settings.get_user_value('size')
            default = settings.get_default_value('size')
            print(label, settings.get_int('size'), 'none' if user is None else user.print_(False),
                  default.print_(False), flush=True)
        \(Self.pythonGdbus)
        def administrator():
            with open(os.environ['ADMIN_DEFAULTS'] + '.new', 'w') as f:
                f.write('[org/example/look]\\nsize=12\\n')
            os.rename(os.environ['ADMIN_DEFAULTS'] + '.new', os.environ['ADMIN_DEFAULTS'])
        show('start')
        loop = GLib.MainLoop()
        for label, step in [('set', lambda: gdbus('Set', '/org/example/look/size', '<8>')),
                            ('reset', lambda: gdbus('Reset', '/org/example/look/size')),
                            ('administrator', administrator)]:
            handler = settings.connect('changed::size', lambda *_: loop.quit())
            timer = GLib.timeout_add_seconds(10, lambda: (print('timeout', flush=True), loop.quit()) and False)
            step()
            loop.run()
            GLib.source_remove(timer) if GLib.main_context_default().find_source_by_id(timer) else None
            settings.disconnect(handler)
            show(label)
        """

    /// An administrator's default reads as a default, as from dconf's system databases: the value while the user
    /// has none, never the user's value, and GSettings' default value; a user value over it, and a reset back to
    /// it; and the administrator's change of it reaches a running app.
    @Test func anAdministratorsDefaultReadsAsADefaultAndNeverAsTheUsersValue() async throws {
        let data = try await Self.lookData()
        defer { data.remove() }
        let admin = try Self.administratorFolder(in: data)
        let defaults = admin.appendingPathComponent("defaults.d/10-site.conf")
        try "[org/example/look]\nsize=10\n".write(to: defaults, atomically: true, encoding: .utf8)

        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: data.arguments + ["--admin-dir", admin.path])
            try await broker.waitForLog(containing: "read the GSettings schemas")
            let connection = try await bus.connect()

            let app = try await TestProcess.run(
                "/usr/bin/python3", ["-c", Self.administratorApp],
                environment: data.environment(bus, ["ADMIN_DEFAULTS": defaults.path]))
            #expect(app.status == 0, "\(app.stderr)")
            #expect(
                app.stdout == "start 10 none 10\nset 8 8 10\nreset 10 none 10\nadministrator 12 none 12\n",
                "\(app.stdout)\(app.stderr)")
            #expect(!app.stderr.contains("settingsbus:"), "\(app.stderr)")

            // The broker keeps them apart: no value of the user's, the administrator's default.
            let layers = try await connection.settings("ReadTreeLayers", [.string("/org/example/look/")])
            #expect(layers.count == 3, "\(layers)")
            #expect(layers.first.map { GVariantText.format($0) } == "@a{sv} {}", "\(layers)")
            #expect(layers.dropFirst().first.map { GVariantText.format($0) } == "{'/org/example/look/size': <12>}")

            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A python3-gi app that prints `size`'s value, user value, default value and writability, then tries to
    /// write it and prints whether it could and what the key reads.
    static let lockedApp = """
        from gi.repository import Gio
        settings = Gio.Settings.new('org.example.Look')
        user = settings.get_user_value('size')
        print('locked', settings.get_int('size'), 'none' if user is None else user.print_(False),
              settings.get_default_value('size').print_(False), settings.is_writable('size'), flush=True)
        print('write', settings.set_int('size', 9), settings.get_int('size'), flush=True)
        """

    /// A key the administrator locked reads the administrator's value and is not writable, and its user value is
    /// still the one the user set before the lock, as with dconf (whose user database keeps it): the broker keeps
    /// it without serving it, and the module asks for it (`Describe`).
    @Test func aLockedKeyKeepsTheUsersValueFromBeforeTheLock() async throws {
        let data = try await Self.lookData()
        defer { data.remove() }
        let store = data.folder.appendingPathComponent("settings.db").path
        let admin = try Self.administratorFolder(in: data)

        try await withTestBus { bus in
            // Given: the user's value, set before the administrator locked the key.
            let first = try await TestBroker.start(on: bus, storePath: store, arguments: data.arguments)
            try await first.waitForLog(containing: "read the GSettings schemas")
            let set = try await GSettingsSchemaSourceTests.gdbusSet(bus, "/org/example/look/size", "<8>")
            #expect(set.status == 0, "\(set.stderr)")
            #expect(await first.stop() == 0)

            // When: the administrator locks it, with a default of theirs.
            try "[org/example/look]\nsize=10\n".write(
                to: admin.appendingPathComponent("defaults.d/10-site.conf"), atomically: true, encoding: .utf8)
            try "/org/example/look/size\n".write(
                to: admin.appendingPathComponent("locks.d/site"), atomically: true, encoding: .utf8)
            let broker = try await TestBroker.start(
                on: bus, storePath: store, arguments: data.arguments + ["--admin-dir", admin.path])
            try await broker.waitForLog(containing: "read the GSettings schemas")
            let app = try await TestProcess.run(
                "/usr/bin/python3", ["-c", Self.lockedApp], environment: data.environment(bus))

            // Then: the administrator's value and default, the user's value from before, and a write refused.
            #expect(app.status == 0, "\(app.stderr)")
            #expect(app.stdout == "locked 10 8 10 False\nwrite False 10\n", "\(app.stdout)\(app.stderr)")
            #expect(!app.stderr.contains("settingsbus:"), "\(app.stderr)")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func flagsChoicesOfAnArrayAndAliasesHoldForEveryWriterAndOutliveARestart() async throws {
        let data = try await Self.lookData()
        defer { data.remove() }
        let store = data.folder.appendingPathComponent("settings.db").path
        let outOfRange = GSettingsSchemaSourceTests.outOfRange

        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, storePath: store, arguments: data.arguments)
            try await broker.waitForLog(containing: "read the GSettings schemas")
            let connection = try await bus.connect()
            let features = try await GSettingsSchemaSourceTests.describe("/org/example/look/features", connection)
            #expect(features["choices"] == .array(.string, [.string("one"), .string("two"), .string("three")]), "\(features)")
            #expect(features["signature"] == .string("as"))

            // A flag that is not one of the nicks, and a tag not among the choices: refused by name, naming it.
            let four = try await GSettingsSchemaSourceTests.gdbusSet(bus, "/org/example/look/features", "<['one', 'four']>")
            #expect(four.status != 0 && four.stderr.contains(outOfRange) && four.stderr.contains("'four'"), "\(four.stderr)")
            let green = try await GSettingsSchemaSourceTests.gdbusSet(bus, "/org/example/look/tags", "<['red', 'green']>")
            #expect(green.status != 0 && green.stderr.contains(outOfRange), "\(green.stderr)")
            await #expect(throws: DBusError.self) {
                _ = try await connection.settings(
                    "Set", [.string("/org/example/look/features"), .variant(.array(.string, [.string("five")]))])
            }
            // Every element among them: stored.
            let two = try await GSettingsSchemaSourceTests.gdbusSet(bus, "/org/example/look/features", "<['one', 'three']>")
            #expect(two.status == 0, "\(two.stderr)")
            let tags = try await GSettingsSchemaSourceTests.gdbusSet(bus, "/org/example/look/tags", "<['red', 'blue']>")
            #expect(tags.status == 0, "\(tags.stderr)")
            // An alias is accepted, as written; GSettings reads it as its target.
            let crimson = try await GSettingsSchemaSourceTests.dbusSendSet(
                bus, "/org/example/look/colour", "variant:string:crimson")
            #expect(crimson.status == 0, "\(crimson.stderr)")
            let environment = data.environment(bus)
            let colour = try await TestProcess.run(
                "/usr/bin/gsettings", ["get", "org.example.Look", "colour"], environment: environment)
            #expect(colour.stdout == "'red'\n", "\(colour.stdout)\(colour.stderr)")
            let flags = try await TestProcess.run(
                "/usr/bin/gsettings", ["get", "org.example.Look", "features"], environment: environment)
            #expect(flags.stdout == "['one', 'three']\n", "\(flags.stdout)\(flags.stderr)")
            await connection.close()
            #expect(await broker.stop() == 0)

            // The choices of a set of flags are stored with the schema and read back at the next start.
            let again = try await TestBroker.start(on: bus, storePath: store, arguments: data.arguments)
            try await again.waitForLog(containing: "read the GSettings schemas")
            let second = try await bus.connect()
            let stored = try await GSettingsSchemaSourceTests.describe("/org/example/look/features", second)
            #expect(stored["choices"] == features["choices"], "\(stored)")
            #expect(stored["value"] == .array(.string, [.string("one"), .string("three")]), "\(stored)")
            let status = GVariantText.format(.structure(try await second.settings("Status")))
            #expect(status.contains("'schema-problems': <@as []>"), "\(status)")
            await second.close()
            #expect(await again.stop() == 0)
        }
    }
}
