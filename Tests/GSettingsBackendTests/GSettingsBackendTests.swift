// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The GSettings backend `settingsbus` (the GIO module `libsettingsbus-gio.so`) with real peers: `gsettings`,
/// python3-gi's `Gio.Settings`, `gdbus` and a Swift app, against a real broker on a private bus, with a schema
/// compiled by `glib-compile-schemas` in a temporary folder.
@Suite(.aloneOnTheMachine, .timeLimit(.minutes(2)))
struct GSettingsBackendTests {
    static let schema = """
        <schemalist>
          <schema id="org.example.Editor" path="/org/example/editor/">
            <key name="greeting" type="s"><default>'hello'</default></key>
            <key name="count" type="i"><default>1</default></key>
            <key name="font-size" type="i"><default>12</default></key>
            <key name="plugins" type="as"><default>[]</default></key>
            <key name="last-file" type="ms"><default>nothing</default></key>
            <key name="window" type="(ii)"><default>(640, 480)</default></key>
          </schema>
          <schema id="org.example.Profile">
            <key name="font" type="s"><default>'Monospace 10'</default></key>
          </schema>
        </schemalist>
        """

    /// A schema compiled in a temporary folder and a folder of GIO modules holding the built backend.
    struct Setup {
        let folder: URL
        var schemas: URL { folder.appendingPathComponent("schemas") }
        var modules: URL { folder.appendingPathComponent("modules") }

        private init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-gio-\(UUID())")
            let manager = FileManager.default
            try manager.createDirectory(at: folder.appendingPathComponent("schemas"), withIntermediateDirectories: true)
            try manager.createDirectory(at: folder.appendingPathComponent("modules"), withIntermediateDirectories: true)
            try GSettingsBackendTests.schema.write(
                to: folder.appendingPathComponent("schemas/org.example.Editor.gschema.xml"), atomically: true,
                encoding: .utf8)
            try manager.createSymbolicLink(
                atPath: folder.appendingPathComponent("modules/libsettingsbus-gio.so").path,
                withDestinationPath: try BuiltProduct.path("libsettingsbus-gio.so"))
        }

        /// A setup whose schema is compiled.
        static func compiled() async throws -> Setup {
            let setup = try Setup()
            let compiled = try await TestProcess.run("/usr/bin/glib-compile-schemas", [setup.schemas.path])
            #expect(compiled.status == 0, "\(compiled.stderr)")
            return setup
        }

        /// An administrator's folder (`--admin-dir`) with an empty `locks.d`.
        func administratorFolder() throws -> URL {
            let admin = folder.appendingPathComponent("admin")
            try FileManager.default.createDirectory(
                at: admin.appendingPathComponent("locks.d"), withIntermediateDirectories: true)
            return admin
        }

        /// The environment of a GSettings app on `bus` that stores through the broker.
        func environment(_ bus: TestBus) -> [String: String] {
            bus.environment.merging([
                "GSETTINGS_BACKEND": "settingsbus", "GIO_EXTRA_MODULES": modules.path,
                "GSETTINGS_SCHEMA_DIR": schemas.path,
            ]) { _, new in new }
        }

        /// The same, reading first from the view `broker` publishes (`SETTINGSBUS_VIEW`, decision 0037).
        func environment(_ bus: TestBus, viewOf broker: TestBroker) -> [String: String] {
            environment(bus).merging(["SETTINGSBUS_VIEW": broker.viewFolder]) { _, new in new }
        }

        func remove() { try? FileManager.default.removeItem(at: folder) }
    }

    /// Runs `gsettings` and returns its standard output without the last newline; a failure, or a word of the
    /// module on standard error, is recorded.
    static func gsettings(_ arguments: [String], _ environment: [String: String]) async throws -> String {
        let run = try await TestProcess.run("/usr/bin/gsettings", arguments, environment: environment)
        #expect(run.status == 0, "gsettings \(arguments.joined(separator: " ")): \(run.stderr)")
        #expect(!run.stderr.contains("settingsbus:"), "\(run.stderr)")
        return run.stdout.hasSuffix("\n") ? String(run.stdout.dropLast()) : run.stdout
    }

    /// The broker's value of a key; nil when it has none (`UnknownKey`).
    static func get(_ key: String, _ connection: DBusConnection) async throws -> DBusValue? {
        let reply: [DBusValue]
        do {
            reply = try await connection.settings("Get", [.string(key)])
        } catch let error as DBusError where error.name.rawValue == "io.github.settingsbus.Settings1.Error.UnknownKey" {
            return nil
        }
        guard case .variant(let value)? = reply.first else { return nil }
        return value
    }

    static func set(_ key: String, _ value: DBusValue, _ connection: DBusConnection) async throws {
        _ = try await connection.settings("Set", [.string(key), .variant(value)])
    }

    /// Runs `body` with a broker (started with `arguments`) on a private bus, a connection to it, and the
    /// environment of a GSettings app that stores through it; then checks that the broker stops cleanly.
    static func withBroker(
        _ setup: Setup, arguments: [String] = [],
        _ body: (TestBus, DBusConnection, [String: String]) async throws -> Void
    ) async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: arguments)
            let connection = try await bus.connect()
            try await body(bus, connection, setup.environment(bus))
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A relocatable schema placed where GNOME Terminal places its profiles, at a path with colons
    /// (`/org/gnome/terminal/legacy/profiles:/:<uuid>/`): the broker takes such keys, so a move from dconf
    /// keeps them.
    @Test func aRelocatableSchemaAtAPathWithColonsIsStoredAndReadBack() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        let path = "/org/example/terminal/profiles:/:b1dcc9dd-5262-4d8d-a863-c897e6d979b9/"
        try await Self.withBroker(setup) { bus, connection, environment in
            _ = try await Self.gsettings(["set", "org.example.Profile:\(path)", "font", "'Monospace 12'"], environment)
            #expect(try await Self.get(path + "font", connection) == .string("Monospace 12"))
            try await Self.set(path + "font", .string("Monospace 14"), connection)
            #expect(try await Self.gsettings(["get", "org.example.Profile:\(path)", "font"], environment) == "'Monospace 14'")
        }
    }

    @Test func gsettingsReadsWritesResetsAndListsThroughTheBroker() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await Self.withBroker(setup) { bus, connection, environment in

            // A key nobody wrote gives the schema's default.
            #expect(try await Self.gsettings(["get", "org.example.Editor", "greeting"], environment) == "'hello'")

            // A gsettings set is in the broker, where any client reads it.
            _ = try await Self.gsettings(["set", "org.example.Editor", "greeting", "'hi there'"], environment)
            #expect(try await Self.get("/org/example/editor/greeting", connection) == .string("hi there"))
            _ = try await Self.gsettings(["set", "org.example.Editor", "window", "(800, 600)"], environment)
            #expect(try await Self.get("/org/example/editor/window", connection) == .structure([.int32(800), .int32(600)]))

            // A write by another client is what the next gsettings reads.
            try await Self.set("/org/example/editor/count", .int32(7), connection)
            #expect(try await Self.gsettings(["get", "org.example.Editor", "count"], environment) == "7")

            // A maybe type round-trips: stored as an array of no element or one, which scripts read.
            _ = try await Self.gsettings(["set", "org.example.Editor", "last-file", "just '/tmp/notes.txt'"], environment)
            #expect(try await Self.gsettings(["get", "org.example.Editor", "last-file"], environment) == "@ms '/tmp/notes.txt'")
            #expect(
                try await Self.get("/org/example/editor/last-file", connection)
                    == .array(.string, [.string("/tmp/notes.txt")]))
            _ = try await Self.gsettings(["set", "org.example.Editor", "last-file", "nothing"], environment)
            #expect(try await Self.gsettings(["get", "org.example.Editor", "last-file"], environment) == "@ms nothing")

            // A reset removes the user value: the schema's default is back.
            _ = try await Self.gsettings(["reset", "org.example.Editor", "greeting"], environment)
            #expect(try await Self.get("/org/example/editor/greeting", connection) == nil)
            #expect(try await Self.gsettings(["get", "org.example.Editor", "greeting"], environment) == "'hello'")

            let listed = try await Self.gsettings(["list-recursively", "org.example.Editor"], environment)
            #expect(listed.contains("org.example.Editor count 7"), "\(listed)")
            #expect(listed.contains("org.example.Editor window (800, 600)"), "\(listed)")
            #expect(try await Self.gsettings(["writable", "org.example.Editor", "count"], environment) == "true")

            // The history names the gsettings process as the writer.
            let history = try await TestProcess.run(
                "/usr/bin/gdbus",
                [
                    "call", "--session", "-d", "io.github.settingsbus.Settings1", "-o", "/io/github/settingsbus/Settings1",
                    "-m", "io.github.settingsbus.Settings1.History", "/org/example/editor/greeting", "0", "0", "10",
                ], environment: bus.environment)
            #expect(history.stdout.contains("'gsettings'"), "\(history.stdout)")
        }
    }

    @Test func aMonitorSeesAnotherClientsWriteAndASwiftAppSeesAGsettingsWrite() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await Self.withBroker(setup) { bus, connection, environment in

            // gsettings monitor follows the key: a write by another client reaches it.
            let monitor = try RunningProcess.start(
                "/usr/bin/gsettings", ["monitor", "org.example.Editor", "font-size"], environment: environment)
            // The monitor reports only changes after it has read and watched the directory, and says nothing when
            // it has: a write is made again, with a new value each time, until the monitor reports one.
            let store = BusSettingsStore(bus: .address(bus.address))
            let fontSize = SettingKey<Int32>("/org/example/editor/font-size", default: 12)
            let values = Collector(store.values(for: fontSize))
            #expect(try await values.next(timeLimit: .seconds(10)) == 12)
            var seen: String?
            for size in Int32(20)...Int32(40) {
                try await Self.set("/org/example/editor/font-size", .int32(size), connection)
                if let line = try? await monitor.nextLine(timeLimit: .seconds(2)) {
                    seen = line
                    break
                }
            }
            #expect(seen?.hasPrefix("font-size: ") == true, "\(seen ?? "nothing")")
            _ = await monitor.terminate()

            // A Swift app's stream sees a gsettings set.
            _ = try await Self.gsettings(["set", "org.example.Editor", "font-size", "31"], environment)
            #expect(try await values.next(where: { $0 == 31 }, timeLimit: .seconds(10)) == 31)
            values.stop()
            await store.close()
        }
    }

    /// A python3-gi app that watches `greeting` and every signal, then forges the broker's `Changed` from a
    /// connection of its own (a newer serial, another value), then has the broker set the key; it prints every
    /// value its `changed` handler read, once the broker's value arrived (or after 10 s).
    static let forgedChanged = """
        import gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        settings = Gio.Settings.new('org.example.Editor')
        settings.get_string('greeting')
        seen = []
        loop = GLib.MainLoop()
        def changed(s, key):
            seen.append(s.get_string('greeting'))
            if seen[-1] == 'real': loop.quit()
        settings.connect('changed::greeting', changed)
        # Another part of the app listens to every signal, so the bus routes the forged one to its connection too.
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        bus.signal_subscribe(None, None, None, None, None, Gio.DBusSignalFlags.NONE, lambda *_: None)
        bus.call_sync('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetId', None, None,
            Gio.DBusCallFlags.NONE, 10000, None)
        address = GLib.getenv('DBUS_SESSION_BUS_ADDRESS')
        rogue = Gio.DBusConnection.new_for_address_sync(address,
            Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
        rogue.emit_signal(None, '/io/github/settingsbus/Settings1', 'io.github.settingsbus.Settings1', 'Changed',
            GLib.Variant('(sa{sv}asts)', ('/org/example/editor/greeting',
                {'/org/example/editor/greeting': GLib.Variant('s', 'forged')}, [], 999999, rogue.get_unique_name())))
        rogue.flush_sync(None)
        rogue.call_sync('io.github.settingsbus.Settings1', '/io/github/settingsbus/Settings1',
            'io.github.settingsbus.Settings1', 'Set', GLib.Variant('(sv)', ('/org/example/editor/greeting',
            GLib.Variant('s', 'real'))), None, Gio.DBusCallFlags.NONE, 10000, None)
        GLib.timeout_add_seconds(10, loop.quit)
        loop.run()
        print(' '.join(seen), settings.get_string('greeting'), flush=True)
        """

    @Test func aChangedSignalForgedByAnotherConnectionNeverReachesTheApp() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await Self.withBroker(setup) { bus, connection, environment in
            let app = try await TestProcess.run("/usr/bin/python3", ["-c", Self.forgedChanged], environment: environment)
            #expect(app.status == 0, "\(app.stderr)")
            // Only the broker's value, and the forged serial did not hold back the real change.
            #expect(app.stdout == "real real\n", "\(app.stdout)\(app.stderr)")
        }
    }

    /// A python3-gi app that reads `count`, says `ready`, and at a line on its standard input sets it to 42; it
    /// prints the values its `changed` handler read, at the second (or after 60 s), and logs each with its time.
    static let unansweredWrite = """
        import sys, time, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        settings = Gio.Settings.new('org.example.Editor')
        settings.get_int('count')
        seen = []
        loop = GLib.MainLoop()
        def changed(s, key):
            seen.append(s.get_int('count'))
            print(f'changed to {seen[-1]} at {time.monotonic() - start:.1f} s', file=sys.stderr, flush=True)
            if len(seen) == 2: loop.quit()
        settings.connect('changed::count', changed)
        print('ready', flush=True)
        sys.stdin.readline()
        start = time.monotonic()
        settings.set_int('count', 42)
        GLib.timeout_add_seconds(60, loop.quit)
        loop.run()
        print(' '.join(map(str, seen)), flush=True)
        """

    @Test(.timeLimit(.minutes(2))) func aWriteTheBrokerDoesNotAnswerIsUndoneAfterTenSeconds() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let app = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.unansweredWrite], environment: setup.environment(bus))
            #expect(try await app.nextLine() == "ready")
            // When: the broker is stopped (not gone: the bus daemon keeps the write for it), and the app writes.
            try await broker.pause()
            app.write("go\n")
            // Then: the app reads its write at once, and the schema's default again once 10 s passed unanswered
            // (not sooner; on a loaded machine it may be later).
            let seen = try await app.nextLine(timeLimit: .seconds(75))
            #expect(kill(broker.pid, SIGCONT) == 0)
            #expect(await app.waitForExit() == 0)
            let stderr = await app.standardError()
            #expect(seen == "42 1", "\(seen ?? "nothing"); the app's errors: \(stderr)")
            let undone = stderr.split(separator: "\n").first { $0.hasPrefix("changed to 1 at ") }
            let undoneAfter = undone.flatMap { Double($0.dropFirst("changed to 1 at ".count).dropLast(2)) }
            #expect(undoneAfter.map { $0 >= 9.5 } == true, "\(stderr)")
            #expect(stderr.contains("a write of /org/example/editor/count to the settings broker failed, and is undone: no answer within 10 s"), "\(stderr)")
            #expect(await broker.stop() == 0)
        }
    }

    /// `Gio.Settings` in python3-gi: `delay()`, three changes and `apply()` are one commit and one `Changed`.
    static let delayedApply = """
        import sys, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio
        s = Gio.Settings.new('org.example.Editor')
        s.delay()
        s.set_string('greeting', 'batch')
        s.set_int('count', 3)
        s.set_strv('plugins', ['spell', 'git'])
        s.apply()
        Gio.Settings.sync()
        print(s.get_string('greeting'), s.get_int('count'), ','.join(s.get_strv('plugins')), flush=True)
        """

    @Test func aDelayedApplyIsOneCommitAndOneChanged() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await Self.withBroker(setup) { _, connection, environment in
            var rule = MatchRule(
                sender: "io.github.settingsbus.Settings1", interface: "io.github.settingsbus.Settings1",
                member: "Changed")
            rule.arguments[0] = "/org/example/editor/"
            let changes = Collector(try await connection.signals(matching: rule))
            let before = try await connection.brokerSerial()

            let run = try await TestProcess.run(
                "/usr/bin/python3", ["-c", Self.delayedApply], environment: environment)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout == "batch 3 spell,git\n")

            // One Changed, with the three keys, at the next serial.
            let changed = try await changes.next(timeLimit: .seconds(10))
            guard case .dictionary(_, _, let entries) = changed.body[1], case .uint64(let serial) = changed.body[3] else {
                Issue.record("unexpected Changed \(changed.body)")
                return
            }
            #expect(entries.count == 3)
            #expect(serial == before + 1)
            #expect(try await Self.get("/org/example/editor/plugins", connection) == .array(.string, [.string("spell"), .string("git")]))
            changes.stop()
        }
    }

    /// Writes `count` again and again, reading it back between the writes while the broker answers the earlier
    /// ones and sends their `Changed` signals; prints how many reads did not give the last value written.
    static let readYourWrites = """
        import gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio
        s = Gio.Settings.new('org.example.Editor')
        s.get_int('count')
        stale = 0
        for i in range(2, 60):
            s.set_int('count', i)
            for _ in range(300):
                if s.get_int('count') != i:
                    stale += 1
        Gio.Settings.sync()
        print('stale', stale, s.get_int('count'), flush=True)
        """

    @Test func aProcessReadsItsOwnLastWriteWhileTheBrokerAnswersTheEarlierOnes() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await Self.withBroker(setup) { _, connection, environment in
            // The Changed signal of an earlier write, arriving after a later write, does not bring the earlier
            // value back into the copy.
            let run = try await TestProcess.run("/usr/bin/python3", ["-c", Self.readYourWrites], environment: environment)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout == "stale 0 59\n", "\(run.stdout) \(run.stderr)")
            #expect(try await Self.get("/org/example/editor/count", connection) == .int32(59))
        }
    }

    /// Asks whether a locked key is writable, then writes it: the write is refused at once.
    static let writeLocked = """
        import gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio
        s = Gio.Settings.new('org.example.Editor')
        writable = s.is_writable('greeting')
        written = s.set_string('greeting', 'mine')
        Gio.Settings.sync()
        print(writable, written, s.get_value('greeting').print_(False), flush=True)
        """

    @Test func aWriteTheBrokerRefusesIsUndoneAndALockedKeyIsNotWritable() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        let admin = try setup.administratorFolder()
        try "/org/example/editor/greeting\n".write(
            to: admin.appendingPathComponent("locks.d/site"), atomically: true, encoding: .utf8)
        try await Self.withBroker(setup, arguments: ["--admin-dir", admin.path]) { bus, _, environment in
            // The broker knows a range for count that the GSettings schema does not say.
            let store = BusSettingsStore(bus: .address(bus.address))
            try await store.register(SettingKey<Int32>("/org/example/editor/count", default: 1).range(0...10))
            await store.close()

            // A value the broker refuses: gsettings wrote it to its copy, the broker refused it, and the module
            // undid it and said why (the next reader sees the old value).
            let refused = try await TestProcess.run(
                "/usr/bin/gsettings", ["set", "org.example.Editor", "count", "50"], environment: environment)
            #expect(refused.stderr.contains("OutOfRange"), "\(refused.stderr)")
            #expect(try await Self.gsettings(["get", "org.example.Editor", "count"], environment) == "1")

            // The administrator's lock: not writable, and a set changes nothing. The module reads the lock list of
            // a directory with it (Locks), so a new process that never asked is refused at once: gsettings says
            // the key is not writable and exits 1, and nothing reaches the broker. One that asked (is_writable)
            // is refused at once too: set returns false.
            #expect(try await Self.gsettings(["writable", "org.example.Editor", "greeting"], environment) == "false")
            let locked = try await TestProcess.run(
                "/usr/bin/gsettings", ["set", "org.example.Editor", "greeting", "'mine'"], environment: environment)
            #expect(locked.status == 1, "\(locked.stderr)")
            #expect(locked.stderr.contains("not writable"), "\(locked.stderr)")
            #expect(!locked.stderr.contains("NotWritable"), "\(locked.stderr)")
            #expect(try await Self.gsettings(["get", "org.example.Editor", "greeting"], environment) == "'hello'")
            let asked = try await TestProcess.run(
                "/usr/bin/python3", ["-c", Self.writeLocked], environment: environment)
            #expect(asked.stdout == "False False 'hello'\n", "\(asked.stdout) \(asked.stderr)")
        }
    }

    /// Follows the writability of `font-size` and prints each `writable-changed`, until the key is locked (or 60 s
    /// pass).
    static let followWritability = """
        import gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        s = Gio.Settings.new('org.example.Editor')
        loop = GLib.MainLoop()
        def changed(settings, key):
            print('writable-changed', key, settings.is_writable(key), flush=True)
            if key == 'font-size' and not settings.is_writable(key):
                loop.quit()
        s.connect('writable-changed', changed)
        print('writable', s.is_writable('font-size'), flush=True)
        GLib.timeout_add_seconds(60, loop.quit)
        loop.run()
        """

    @Test func anAdministratorsNewLockReachesARunningAppAsWritableChanged() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        let admin = try setup.administratorFolder()
        try await Self.withBroker(setup, arguments: ["--admin-dir", admin.path]) { _, _, environment in
            let app = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.followWritability], environment: environment)
            #expect(try await app.nextLine(timeLimit: .seconds(30)) == "writable True")

            // When: the administrator locks the key while the app runs.
            try "/org/example/editor/font-size\n".write(
                to: admin.appendingPathComponent("locks.d/site"), atomically: true, encoding: .utf8)

            // Then: the broker's DescriptionChanged reaches the app as writable-changed, and the key is locked.
            #expect(try await app.nextLine(timeLimit: .seconds(30)) == "writable-changed font-size False")
            #expect(await app.waitForExit() == 0)
        }
    }

    /// Binds a GObject property to `greeting` (`g_settings_bind`) and prints the property each time it follows
    /// the key, until it reads 'from another process' (or 60 s pass).
    static let bindGreeting = """
        import gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib, GObject
        class Window(GObject.Object):
            title = GObject.Property(type=str, default='')
        s = Gio.Settings.new('org.example.Editor')
        window = Window()
        s.bind('greeting', window, 'title', Gio.SettingsBindFlags.DEFAULT)
        loop = GLib.MainLoop()
        def notified(obj, spec):
            print('title', obj.props.title, flush=True)
            if obj.props.title == 'from another process':
                loop.quit()
        window.connect('notify::title', notified)
        print('title', window.props.title, flush=True)
        GLib.timeout_add_seconds(60, loop.quit)
        loop.run()
        """

    /// A property bound to a key (`g_settings_bind`) follows a write made by another process while the app runs,
    /// and the app's own change of the property reaches the broker.
    @Test func aBoundPropertyFollowsAnotherProcesssWrite() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await Self.withBroker(setup) { _, connection, environment in
            let app = try RunningProcess.start("/usr/bin/python3", ["-c", Self.bindGreeting], environment: environment)
            #expect(try await app.nextLine(timeLimit: .seconds(30)) == "title hello")

            // When: another process writes the key.
            try await Self.set("/org/example/editor/greeting", .string("from another process"), connection)

            // Then: the bound property follows it, through the broker's Changed and the module's copy.
            #expect(try await app.nextLine(timeLimit: .seconds(30)) == "title from another process")
            #expect(await app.waitForExit() == 0)
        }
    }

    @Test func theModuleNeedsNoSwiftRuntime() async throws {
        let module = try BuiltProduct.path("libsettingsbus-gio.so")
        let dynamic = try await TestProcess.run("/usr/bin/readelf", ["-d", module])
        #expect(dynamic.status == 0)
        let needed = dynamic.stdout.split(separator: "\n").filter { $0.contains("(NEEDED)") }
        #expect(!needed.isEmpty)
        #expect(needed.allSatisfy { !$0.contains("swift") && !$0.contains("stdc++") }, "\(needed)")
        let symbols = try await TestProcess.run("/usr/bin/nm", ["-D", "--defined-only", module])
        for function in ["g_io_module_load", "g_io_module_unload", "g_io_module_query"] {
            #expect(symbols.stdout.contains(" T \(function)"), "\(function) is not exported")
        }
    }
}
