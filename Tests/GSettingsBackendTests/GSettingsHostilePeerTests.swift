// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The GSettings backend against peers that do not behave: a rogue owner of the broker's name that answers with
/// what GLib would refuse, a monitor that answers an app's write before the broker, a broker that does not
/// answer, a broker restarted on an older store. Python3-gi apps and `gsettings` on a private bus.
@Suite(.aloneOnTheMachine, .timeLimit(.minutes(3)))
struct GSettingsHostilePeerTests {
    typealias Setup = GSettingsBackendTests.Setup

    /// A python3-gi owner of the broker's name, `rogue_broker.py MODE`. It prints `ready` once it owns the name.
    /// MODE `bad-keys`: it answers a directory's read with a key ending in `/` beside a good one, and at a line
    /// on its standard input sends a `Changed` that lists such a key too, beside a good change of `count`.
    /// MODE `silent`: it never answers. MODE `refuses-writes`: it answers reads, and refuses every `Set` and
    /// `Reset` (`InvalidValue`); MODE `holds-writes`: it answers reads, and never a `Set` or `Reset`.
    static let rogueBroker = """
        import sys, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        mode = sys.argv[1]
        XML = '''<node><interface name="io.github.settingsbus.Settings1">
        <method name="ReadTreeLayers"><arg type="s" direction="in"/><arg type="a{sv}" direction="out"/>
          <arg type="a{sv}" direction="out"/><arg type="t" direction="out"/></method>
        <method name="Locks"><arg type="s" direction="in"/><arg type="as" direction="out"/></method>
        <method name="Describe"><arg type="s" direction="in"/><arg type="a{sv}" direction="out"/></method>
        <method name="Set"><arg type="s" direction="in"/><arg type="v" direction="in"/><arg type="t" direction="out"/></method>
        <method name="Reset"><arg type="s" direction="in"/><arg type="t" direction="out"/></method>
        <signal name="Changed"><arg type="s"/><arg type="a{sv}"/><arg type="as"/><arg type="t"/><arg type="s"/></signal>
        <signal name="DescriptionChanged"><arg type="s"/><arg type="as"/><arg type="t"/><arg type="s"/></signal>
        </interface></node>'''
        PATH = '/io/github/settingsbus/Settings1'
        INTERFACE = 'io.github.settingsbus.Settings1'
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        held = []
        def called(connection, sender, path, interface, method, parameters, invocation):
            writing = method in ('Set', 'Reset')
            if mode == 'silent' or (mode == 'holds-writes' and writing):
                held.append(invocation)
            elif mode == 'refuses-writes' and writing:
                invocation.return_dbus_error('io.github.settingsbus.Settings1.Error.InvalidValue', 'refused')
            elif method == 'ReadTreeLayers' and mode != 'bad-keys':
                invocation.return_value(GLib.Variant('(a{sv}a{sv}t)', (
                    {'/org/example/editor/greeting': GLib.Variant('s', 'from the rogue')}, {}, 5)))
            elif method == 'ReadTreeLayers':
                invocation.return_value(GLib.Variant('(a{sv}a{sv}t)', (
                    {'/org/example/editor/': GLib.Variant('s', 'bad'),
                     '/org/example/editor/greeting': GLib.Variant('s', 'from the rogue')},
                    {'/org/example/editor/': GLib.Variant('i', 3)}, 5)))
            elif method == 'Locks':
                invocation.return_value(GLib.Variant('(as)', ([],)))
            else:
                invocation.return_value(GLib.Variant('(a{sv})', ({},)))
        bus.register_object(PATH, Gio.DBusNodeInfo.new_for_xml(XML).interfaces[0], called, None, None)
        loop = GLib.MainLoop()
        def owned(*_):
            print('ready', flush=True)
        Gio.bus_own_name_on_connection(bus, INTERFACE, Gio.BusNameOwnerFlags.NONE, owned, lambda *_: loop.quit())
        def line(channel, condition):
            text = sys.stdin.readline()
            if not text:
                loop.quit()
                return False
            bus.emit_signal(None, PATH, INTERFACE, 'Changed', GLib.Variant('(sa{sv}asts)', ('/org/example/editor/',
                {'/org/example/editor/': GLib.Variant('s', 'bad'), '/org/example/editor/count': GLib.Variant('i', 7)},
                ['/org/example/editor/', '/org/example/editor//x'], 6, 'rogue')))
            bus.emit_signal(None, PATH, INTERFACE, 'DescriptionChanged',
                GLib.Variant('(sast)', ('/org/example/editor/', ['/org/example/editor/', ''], 6)))
            bus.flush_sync(None)
            return True
        GLib.io_add_watch(GLib.IOChannel.unix_new(0), GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP, line)
        loop.run()
        """

    /// Reads `greeting`, says so, then waits for `count` to change (or 30 s) and prints it.
    static let followCount = """
        import gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        s = Gio.Settings.new('org.example.Editor')
        loop = GLib.MainLoop()
        s.connect('changed::count', lambda *_: loop.quit())
        print('read', s.get_string('greeting'), flush=True)
        GLib.timeout_add_seconds(30, loop.quit)
        loop.run()
        print('count', s.get_int('count'), flush=True)
        """

    /// What an owner of the broker's name answers or signals is checked before GLib sees it: a key ending in `/`
    /// (in a read's values and defaults, in a `Changed`, in a `DescriptionChanged`) is dropped, with one line in
    /// the log, and raises no CRITICAL; the good entries beside it are taken.
    @Test func keysThatAreNotKeysFromTheBrokersNameNeverReachGLib() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let rogue = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.rogueBroker, "bad-keys"], environment: bus.environment)
            #expect(try await rogue.nextLine() == "ready")
            let app = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.followCount], environment: setup.environment(bus))
            #expect(try await app.nextLine() == "read from the rogue")
            rogue.write("emit\n")
            #expect(try await app.nextLine(timeLimit: .seconds(40)) == "count 7")
            #expect(await app.waitForExit() == 0)
            let log = await app.standardError()
            #expect(!log.contains("CRITICAL"), "\(log)")
            let dropped = log.split(separator: "\n").filter { $0.contains("settingsbus: dropped") }
            #expect(dropped.count == 1, "\(log)")
            rogue.closeInput()
            #expect(await rogue.waitForExit() == 0)
        }
    }

    /// A python3-dbus peer that reads every `Set` on the bus (an eavesdropping match rule, as a monitor reads them)
    /// and answers the first one itself, with a serial far ahead of the broker's; it prints `answered` then.
    static let eavesdropper = """
        import sys
        import dbus, dbus.lowlevel
        from dbus.mainloop.glib import DBusGMainLoop
        from gi.repository import GLib
        DBusGMainLoop(set_as_default=True)
        bus = dbus.SessionBus()
        bus.add_match_string("eavesdrop=true,type='method_call',interface='io.github.settingsbus.Settings1',member='Set'")
        answered = []
        def seen(connection, message):
            if not answered and isinstance(message, dbus.lowlevel.MethodCallMessage) and message.get_member() == 'Set':
                reply = dbus.lowlevel.MethodReturnMessage(message)
                reply.append(dbus.UInt64(1 << 62), signature='t')
                connection.send_message(reply)
                connection.flush()
                answered.append(message.get_serial())
                print('answered', message.get_sender(), message.get_serial(), flush=True)
        bus.add_message_filter(seen)
        print('ready', flush=True)
        GLib.MainLoop().run()
        """

    /// Reads `count`, says `ready`, and at a line on its standard input sets it to 5; then waits until it reads 9
    /// (or 20 s pass) and prints what it reads.
    static let writeThenFollow = """
        import sys, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        s = Gio.Settings.new('org.example.Editor')
        print('ready', s.get_int('count'), flush=True)
        sys.stdin.readline()
        s.set_int('count', 5)
        loop = GLib.MainLoop()
        s.connect('changed::count', lambda *_: s.get_int('count') == 9 and loop.quit())
        GLib.timeout_add_seconds(20, loop.quit)
        loop.run()
        print('count', s.get_int('count'), flush=True)
        """

    /// An answer to the app's write from a peer that read the call on the bus, sent before the broker's, is
    /// dropped: the app takes the broker's, and then follows another process's change of the key.
    @Test func anAnswerToAWriteFromAnotherPeerThanTheBrokerIsDropped() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            let rogue = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.eavesdropper], environment: bus.environment)
            #expect(try await rogue.nextLine() == "ready")
            let app = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.writeThenFollow], environment: setup.environment(bus))
            #expect(try await app.nextLine() == "ready 1")
            // The broker is stopped while the app writes, so that the peer's answer comes first.
            try await broker.pause()
            app.write("go\n")
            let answered = try await rogue.nextLine()
            #expect(answered?.hasPrefix("answered ") == true, "\(answered ?? "nothing")")
            #expect(kill(broker.pid, SIGCONT) == 0)
            try await GSettingsBackendTests.set("/org/example/editor/count", .int32(9), connection)
            #expect(try await app.nextLine() == "count 9")
            #expect(await app.waitForExit() == 0)
            let log = await app.standardError()
            #expect(log.contains("settingsbus: dropped an answer from :"), "\(log)")
            _ = await rogue.terminate()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// Makes and drops 100 GSettings objects of a relocatable schema, each at a path of its own, and says `made`
    /// with its unique name once the bus daemon has everything it sent; at a line on its standard input, reads
    /// the first path's key again with a new object.
    static let manyPaths = """
        import sys, gc, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio
        bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
        for i in range(100):
            s = Gio.Settings.new_with_path('org.example.Profile', f'/org/example/profiles/p{i}/')
            s.get_string('font')
            del s
        gc.collect()
        bus.call_sync('org.freedesktop.DBus', '/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetId', None, None,
            Gio.DBusCallFlags.NONE, 10000, None)
        print('made', bus.get_unique_name(), flush=True)
        sys.stdin.readline()
        s = Gio.Settings.new_with_path('org.example.Profile', '/org/example/profiles/p0/')
        print('font', s.get_string('font'), flush=True)
        """

    /// A directory's watch goes with its last GSettings object: an app that makes objects at many paths and drops
    /// them keeps no match rule for them on the bus, and a new object reads the broker's value again.
    @Test func aDirectoryNoObjectUsesLeavesNoMatchRuleBehind() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await GSettingsBackendTests.withBroker(setup) { bus, connection, environment in
            let app = try RunningProcess.start("/usr/bin/python3", ["-c", Self.manyPaths], environment: environment)
            let made = try await app.nextLine()
            let name = made.map { String($0.dropFirst("made ".count)) } ?? ""
            #expect(made?.hasPrefix("made :") == true, "\(made ?? "nothing")")
            let rules = try await TestProcess.run(
                "/usr/bin/gdbus",
                [
                    "call", "--session", "-d", "org.freedesktop.DBus", "-o", "/org/freedesktop/DBus",
                    "-m", "org.freedesktop.DBus.Debug.Stats.GetAllMatchRules",
                ], environment: bus.environment)
            #expect(rules.status == 0, "\(rules.stderr)")
            let line = rules.stdout.split(separator: "\n").first ?? ""
            #expect(line.contains("'\(name)'"), "\(rules.stdout)")
            let left = line.components(separatedBy: "/org/example/profiles/").count - 1
            #expect(left == 0, "\(left) match rules of dropped objects: \(rules.stdout)")
            try await GSettingsBackendTests.set(
                "/org/example/profiles/p0/font", .string("Monospace 20"), connection)
            app.write("again\n")
            #expect(try await app.nextLine() == "font Monospace 20")
            #expect(await app.waitForExit() == 0)
        }
    }

    /// Reads `greeting` and says so; at a line on its standard input, reads it again.
    static let readTwice = """
        import sys, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio
        s = Gio.Settings.new('org.example.Editor')
        print('first', s.get_string('greeting'), flush=True)
        sys.stdin.readline()
        print('again', s.get_string('greeting'), flush=True)
        """

    /// A directory whose first read failed (no broker) is read again at the next read, once a broker is there.
    @Test func aDirectoryWhoseReadFailedIsReadAgain() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        let store = setup.folder.appendingPathComponent("settings.db").path
        try await withTestBus { bus in
            let first = try await TestBroker.start(on: bus, storePath: store)
            let connection = try await bus.connect()
            try await GSettingsBackendTests.set("/org/example/editor/greeting", .string("stored"), connection)
            await connection.close()
            #expect(await first.stop() == 0)

            let app = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.readTwice], environment: setup.environment(bus))
            #expect(try await app.nextLine() == "first hello")
            let broker = try await TestBroker.start(on: bus, storePath: store)
            app.write("again\n")
            #expect(try await app.nextLine() == "again stored")
            #expect(await app.waitForExit() == 0)
            let log = await app.standardError()
            #expect(log.contains("settingsbus: cannot read /org/example/editor/ from the settings broker"), "\(log)")
            #expect(await broker.stop() == 0)
        }
    }

    /// Follows `count`: prints it, then each value its `changed` handler reads, until its standard input closes.
    static let followCountLines = """
        import sys, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        s = Gio.Settings.new('org.example.Editor')
        print('count', s.get_int('count'), flush=True)
        s.connect('changed::count', lambda settings, key: print('count', settings.get_int('count'), flush=True))
        loop = GLib.MainLoop()
        GLib.io_add_watch(GLib.IOChannel.unix_new(0), GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP,
            lambda *_: loop.quit())
        loop.run()
        """

    /// A broker started again on a copy of its store from before (a backup: its serial went back) reaches a
    /// running app: the app reads its directories again, serves the copy's value, and follows later changes.
    @Test func aBrokerRestartedOnAnOlderStoreIsFollowed() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        let manager = FileManager.default
        let current = setup.folder.appendingPathComponent("current")
        let backup = setup.folder.appendingPathComponent("backup")
        try manager.createDirectory(at: current, withIntermediateDirectories: true)
        try manager.createDirectory(at: backup, withIntermediateDirectories: true)
        let store = current.appendingPathComponent("settings.db").path
        try await withTestBus { bus in
            let first = try await TestBroker.start(on: bus, storePath: store)
            var connection = try await bus.connect()
            try await GSettingsBackendTests.set("/org/example/editor/count", .int32(2), connection)
            await connection.close()
            #expect(await first.stop() == 0)
            for file in try manager.contentsOfDirectory(atPath: current.path) {
                try manager.copyItem(
                    at: current.appendingPathComponent(file), to: backup.appendingPathComponent(file))
            }

            let newer = try await TestBroker.start(on: bus, storePath: store)
            connection = try await bus.connect()
            let app = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.followCountLines], environment: setup.environment(bus))
            #expect(try await app.nextLine() == "count 2")
            for count in Int32(3)...Int32(30) {
                try await GSettingsBackendTests.set("/org/example/editor/count", .int32(count), connection)
            }
            try await app.line(where: { $0 == "count 30" })
            await connection.close()
            #expect(await newer.stop() == 0)

            // When: the broker starts again on the backup, whose serial is far behind.
            let restored = try await TestBroker.start(
                on: bus, storePath: backup.appendingPathComponent("settings.db").path)
            // Then: the app reads the backup's value, and follows the next change. (A handler reads the value when
            // it runs, so two changes that reach it together print the later value twice.)
            let restoredLine = try await app.line(where: { $0 == "count 2" })
            #expect(restoredLine.skipped.allSatisfy { $0 == "count 30" }, "\(restoredLine.skipped)")
            connection = try await bus.connect()
            try await GSettingsBackendTests.set("/org/example/editor/count", .int32(7), connection)
            let followed = try await app.line(where: { $0 == "count 7" })
            #expect(followed.skipped.allSatisfy { $0 == "count 2" }, "\(followed.skipped)")
            app.closeInput()
            #expect(await app.waitForExit() == 0)
            await connection.close()
            #expect(await restored.stop() == 0)
        }
    }

    /// Makes four GSettings objects (four directories) and reads a key of each, then prints how long that took and
    /// what it read; then waits until `greeting` reads 'stored' (or 60 s pass) and says `caught up`.
    static let fourObjects = """
        import time, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        start = time.monotonic()
        objects = [Gio.Settings.new('org.example.Editor')] + [
            Gio.Settings.new_with_path('org.example.Profile', f'/org/example/profiles/p{i}/') for i in range(3)]
        values = [objects[0].get_string('greeting')] + [o.get_string('font') for o in objects[1:]]
        print(f'{time.monotonic() - start:.2f}', ', '.join(values), flush=True)
        loop = GLib.MainLoop()
        def changed(s, key):
            if s.get_string('greeting') == 'stored':
                print('caught up', flush=True)
                loop.quit()
        objects[0].connect('changed::greeting', changed)
        GLib.timeout_add_seconds(60, loop.quit)
        loop.run()
        """

    /// The longest the module lets a thread wait for the broker (BROKER_WAIT_MS), and what else an app's four
    /// GSettings objects may take on a loaded machine.
    static let brokerWait = 2.0
    static let appWork = 1.0

    /// A stopped broker (SIGSTOP) holds up an app for one bounded wait in all, not one per directory: the app
    /// reads the schema's defaults, says so once in its log, and catches up when the broker goes on.
    @Test func aStoppedBrokerHoldsUpAnAppForOneBoundedWaitAndIsCaughtUpWith() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            try await GSettingsBackendTests.set("/org/example/editor/greeting", .string("stored"), connection)
            await connection.close()
            try await broker.pause()
            let app = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.fourObjects], environment: setup.environment(bus))
            let made = try await app.nextLine()
            #expect(kill(broker.pid, SIGCONT) == 0)
            let parts = made?.split(separator: " ", maxSplits: 1) ?? []
            let seconds = parts.first.flatMap { Double($0) } ?? .infinity
            #expect(seconds < Self.brokerWait + Self.appWork, "\(made ?? "nothing")")
            #expect(parts.last == "hello, Monospace 10, Monospace 10, Monospace 10", "\(made ?? "nothing")")
            #expect(try await app.nextLine() == "caught up")
            #expect(await app.waitForExit() == 0)
            let log = await app.standardError()
            let said = log.split(separator: "\n").filter { $0.contains("settingsbus: the settings broker does not answer") }
            #expect(said.count == 1, "\(log)")
            #expect(await broker.stop() == 0)
        }
    }

    /// An owner of the broker's name that never answers: `gsettings get` gives the schema's default and `gsettings
    /// set` exits non-zero (nothing was stored), each within the bounded wait.
    @Test func gsettingsFacingABrokerThatNeverAnswersEndsWithinTheBoundAndASetFails() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let rogue = try RunningProcess.start(
                "/usr/bin/python3", ["-c", Self.rogueBroker, "silent"], environment: bus.environment)
            #expect(try await rogue.nextLine() == "ready")
            let environment = setup.environment(bus)
            let clock = ContinuousClock()
            var get: TestProcess.Result?
            let getTime = try await clock.measure {
                get = try await TestProcess.run(
                    "/usr/bin/gsettings", ["get", "org.example.Editor", "greeting"], environment: environment)
            }
            #expect(get?.status == 0, "\(get?.stderr ?? "")")
            #expect(get?.stdout == "'hello'\n", "\(get?.stdout ?? "")")
            #expect(getTime < .seconds(Self.brokerWait + Self.appWork), "gsettings get took \(getTime)")
            var set: TestProcess.Result?
            let setTime = try await clock.measure {
                set = try await TestProcess.run(
                    "/usr/bin/gsettings", ["set", "org.example.Editor", "greeting", "'mine'"], environment: environment)
            }
            #expect(set?.status != 0, "\(set?.stderr ?? "")")
            #expect(set?.stderr.contains("settingsbus: the settings broker does not answer") == true, "\(set?.stderr ?? "")")
            #expect(setTime < .seconds(Self.brokerWait + Self.appWork), "gsettings set took \(setTime)")
            rogue.closeInput()
            #expect(await rogue.waitForExit() == 0)
        }
    }

    /// An owner of the broker's name that answers reads but refuses every write, or never answers one: `gsettings
    /// set` and `gsettings reset` exit non-zero and say the value was not stored, within the bounded wait; an app
    /// that calls `g_settings_sync` after such a write goes on.
    @Test func gsettingsExitsNonZeroWhenItsWriteIsRefusedOrNotConfirmed() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let environment = setup.environment(bus)
            for (mode, said) in [
                ("refuses-writes", "settingsbus: the settings broker did not store the value"),
                ("holds-writes", "settingsbus: the settings broker did not confirm within 2 s that it stored the value"),
            ] {
                let rogue = try RunningProcess.start(
                    "/usr/bin/python3", ["-c", Self.rogueBroker, mode], environment: bus.environment)
                #expect(try await rogue.nextLine() == "ready")
                for arguments in [["set", "org.example.Editor", "greeting", "'mine'"], ["reset", "org.example.Editor", "greeting"]] {
                    let clock = ContinuousClock()
                    var result: TestProcess.Result?
                    let time = try await clock.measure {
                        result = try await TestProcess.run("/usr/bin/gsettings", arguments, environment: environment)
                    }
                    #expect(result?.status == 1, "\(mode) \(arguments): \(result?.stderr ?? "")")
                    #expect(result?.stderr.contains(said) == true, "\(mode) \(arguments): \(result?.stderr ?? "")")
                    #expect(time < .seconds(Self.brokerWait + Self.appWork), "\(mode) \(arguments) took \(time)")
                }
                // Any other program's sync returns: only the gsettings tool ends on it.
                let app = try await TestProcess.run(
                    "/usr/bin/python3",
                    ["-c", """
                        import gi
                        gi.require_version('Gio', '2.0')
                        from gi.repository import Gio
                        s = Gio.Settings.new('org.example.Editor')
                        s.set_string('greeting', 'mine')
                        Gio.Settings.sync()
                        print('went on', flush=True)
                        """], environment: environment)
                #expect(app.status == 0 && app.stdout == "went on\n", "\(mode): \(app.stderr)")
                rogue.closeInput()
                #expect(await rogue.waitForExit() == 0)
            }
        }
    }
}
