// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// GSettings apps read a directory first from the view the broker publishes (decision 0037), with no wait for
/// the broker: `gsettings` and python3-gi apps on a private bus, with the broker running, stopped, and a view
/// that was damaged or replaced.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct GSettingsViewTests {
    typealias Setup = GSettingsBackendTests.Setup

    /// Reads `greeting` and three profiles' `font`, prints how long that took (seconds) and the values, then
    /// waits for `count` to change (or 30 s) and prints it.
    static let readAndFollow = """
        import time, gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio, GLib
        start = time.monotonic()
        objects = [Gio.Settings.new('org.example.Editor')] + [
            Gio.Settings.new_with_path('org.example.Profile', f'/org/example/profiles/p{i}/') for i in range(3)]
        values = [objects[0].get_string('greeting')] + [o.get_string('font') for o in objects[1:]]
        print(f'{time.monotonic() - start:.2f}', ', '.join(values), flush=True)
        loop = GLib.MainLoop()
        objects[0].connect('changed::count', lambda *_: loop.quit())
        GLib.timeout_add_seconds(30, loop.quit)
        loop.run()
        print('count', objects[0].get_int('count'), flush=True)
        """

    /// A broker on `bus` that stored `greeting` and one profile's `font`, once its view is complete; a
    /// connection to it, and the environment of an app that reads its view.
    static func brokerWithValues(_ bus: TestBus, _ setup: Setup) async throws -> (TestBroker, DBusConnection, [String: String]) {
        let broker = try await TestBroker.start(on: bus)
        let connection = try await bus.connect()
        try await GSettingsBackendTests.set("/org/example/editor/greeting", .string("stored"), connection)
        try await GSettingsBackendTests.set("/org/example/profiles/p1/font", .string("Serif 11"), connection)
        try await broker.waitForTheView()
        return (broker, connection, setup.environment(bus, viewOf: broker))
    }

    /// The view's file of a directory.
    static func viewFile(_ broker: TestBroker, _ directory: String) -> String {
        broker.viewFolder + "/" + View1.fileName(of: directory)
    }

    /// With the broker stopped (SIGSTOP), an app reads the values the broker stored, from the view, at once: no
    /// wait, no word in its log; and a change made when the broker goes on reaches it.
    @Test func anAppReadsTheStoredValuesFromTheViewWithTheBrokerStopped() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let (broker, connection, environment) = try await Self.brokerWithValues(bus, setup)
            try await broker.pause()
            // A wait for the broker would end unanswered, with the module's word in the log and the schema's
            // default; how long a process takes is settings-bench's to measure.
            let get = try await TestProcess.run(
                "/usr/bin/gsettings", ["get", "org.example.Editor", "greeting"], environment: environment)
            #expect(get.stdout == "'stored'\n" && get.status == 0, "\(get.stdout) \(get.stderr)")
            #expect(!get.stderr.contains("settingsbus"), "\(get.stderr)")
            let app = try RunningProcess.start("/usr/bin/python3", ["-c", Self.readAndFollow], environment: environment)
            let read = try await app.nextLine()
            let parts = read?.split(separator: " ", maxSplits: 1) ?? []
            #expect(parts.last == "stored, Monospace 10, Serif 11, Monospace 10", "\(read ?? "nothing")")
            #expect(kill(broker.pid, SIGCONT) == 0)
            try await GSettingsBackendTests.set("/org/example/editor/count", .int32(7), connection)
            #expect(try await app.nextLine() == "count 7")
            #expect(await app.waitForExit() == 0)
            let log = await app.standardError()
            #expect(!log.contains("settingsbus"), "\(log)")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// With the bus daemon itself stopped (SIGSTOP), `gsettings get` reads the stored value from the view at once:
    /// the module connects to the bus on its own thread, and before it has, it knows its bus by the GUID in the
    /// address, else by the socket file the address names. A view whose `complete` names another socket is not
    /// read: the app waits for its bus (2 s), says so once, and reads the schema's default.
    @Test func anAppReadsFromTheViewWithTheBusDaemonStopped() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let (broker, connection, environment) = try await Self.brokerWithValues(bus, setup)
            let guid = try #require(connection.serverID)
            let complete = broker.viewFolder + "/complete"
            let written = try #require(View1.read(complete).flatMap { View1.Complete($0.message) })
            #expect(written.bus == guid && !written.socket.isEmpty, "\(written)")
            try await bus.daemon.pause()
            defer { bus.daemon.signal(SIGCONT) }
            for (named, address) in [("its socket file", bus.address), ("its GUID", bus.address + ",guid=" + guid)] {
                var app = environment
                app["DBUS_SESSION_BUS_ADDRESS"] = address
                let get = try await TestProcess.run(
                    "/usr/bin/gsettings", ["get", "org.example.Editor", "greeting"], environment: app)
                #expect(get.stdout == "'stored'\n" && get.status == 0, "by \(named): \(get.stdout) \(get.stderr)")
                #expect(!get.stderr.contains("settingsbus"), "by \(named): \(get.stderr)")
            }
            var other = written
            other.socket = "0:0"
            try Data(try other.message.marshalled()).write(to: URL(fileURLWithPath: complete))
            let clock = ContinuousClock()
            let start = clock.now
            let get = try await TestProcess.run(
                "/usr/bin/gsettings", ["get", "org.example.Editor", "greeting"], environment: environment)
            #expect(clock.now - start >= .seconds(2))
            #expect(get.stdout == "'hello'\n" && get.status == 0, "\(get.stdout) \(get.stderr)")
            #expect(get.stderr.contains("the session bus does not answer within 2 s"), "\(get.stderr)")
            bus.daemon.signal(SIGCONT)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A view file that cannot be trusted is left for the bus: garbage, a file cut short, another directory's
    /// file, a link, a view that is not complete. The app reads the broker's value each time, with no CRITICAL,
    /// and a view file another process of the user wrote whole is read as it is.
    @Test func aViewThatCannotBeTrustedIsLeftForTheBus() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let (broker, connection, environment) = try await Self.brokerWithValues(bus, setup)
            let file = Self.viewFile(broker, "/org/example/editor/")
            let good = try Data(contentsOf: URL(fileURLWithPath: file))
            let other = try Data(contentsOf: URL(fileURLWithPath: Self.viewFile(broker, "/org/example/profiles/p1/")))
            // A file written whole by another process of the user is what the app reads: the view is read.
            let forged = DBusMessage.signal(
                path: "/io/github/settingsbus/View1", interface: "io.github.settingsbus.View1", member: "Directory",
                body: [
                    .uint64(1), .string("/org/example/editor/"),
                    .dictionary(key: .string, value: .variant, [DBusDictEntry(key: .string("/org/example/editor/greeting"), value: .variant(.string("from the file")))]),
                    .dictionary(key: .string, value: .variant, []), .array(.string, []),
                    .dictionary(key: .string, value: .variant, []), .array(.string, []),
                ])
            try Data(try forged.marshalled()).write(to: URL(fileURLWithPath: file))
            #expect(try await GSettingsBackendTests.gsettings(["get", "org.example.Editor", "greeting"], environment) == "'from the file'")

            let complete = broker.viewFolder + "/complete"
            let completeBytes = try Data(contentsOf: URL(fileURLWithPath: complete))
            let damages: [(String, () throws -> Void)] = [
                ("garbage", { try Data(repeating: 0x6c, count: 4096).write(to: URL(fileURLWithPath: file)) }),
                ("cut short", { try good.prefix(good.count / 2).write(to: URL(fileURLWithPath: file)) }),
                ("another directory's file", { try other.write(to: URL(fileURLWithPath: file)) }),
                ("a link", {
                    try? FileManager.default.removeItem(atPath: file + ".target")
                    try forged.marshalled().withUnsafeBytes { try Data($0).write(to: URL(fileURLWithPath: file + ".target")) }
                    try? FileManager.default.removeItem(atPath: file)
                    try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: file + ".target")
                }),
                ("not complete", {
                    try? FileManager.default.removeItem(atPath: file)
                    try Data(try forged.marshalled()).write(to: URL(fileURLWithPath: file))
                    try FileManager.default.removeItem(atPath: complete)
                }),
                ("a complete of another kind", { try good.write(to: URL(fileURLWithPath: complete)) }),
                ("the view of a broker on another bus", {
                    let other = View1.Complete(
                        serial: 1, store: broker.storePath, bus: String(repeating: "0", count: 32), socket: "0:0"
                    ).message
                    try Data(try other.marshalled()).write(to: URL(fileURLWithPath: complete))
                }),
            ]
            for (damage, make) in damages {
                try make()
                let run = try await TestProcess.run(
                    "/usr/bin/gsettings", ["get", "org.example.Editor", "greeting"], environment: environment)
                #expect(run.status == 0 && run.stdout == "'stored'\n", "\(damage): \(run.stdout) \(run.stderr)")
                #expect(!run.stderr.contains("CRITICAL"), "\(damage): \(run.stderr)")
            }
            try completeBytes.write(to: URL(fileURLWithPath: complete))
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A directory read from the view holds its own keys only: reading it after a directory below it keeps what
    /// that one read (its values, and the administrator's defaults there), with the broker stopped as well.
    @Test func aDirectoryReadFromTheViewKeepsTheDirectoriesBelowIt() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // The directory above written last: its file's serial is the newer.
            try await GSettingsBackendTests.set("/org/example/a/b/font", .string("Child 11"), connection)
            try await GSettingsBackendTests.set("/org/example/a/font", .string("Parent 10"), connection)
            try await broker.waitForTheView()
            try await broker.pause()
            let app = try await TestProcess.run(
                "/usr/bin/python3",
                ["-c", """
                    import gi
                    gi.require_version('Gio', '2.0')
                    from gi.repository import Gio
                    child = Gio.Settings.new_with_path('org.example.Profile', '/org/example/a/b/')
                    first = child.get_string('font')
                    parent = Gio.Settings.new_with_path('org.example.Profile', '/org/example/a/')
                    print(first, '|', parent.get_string('font'), '|', child.get_string('font'), flush=True)
                    """], environment: setup.environment(bus, viewOf: broker))
            #expect(kill(broker.pid, SIGCONT) == 0)
            #expect(app.stdout == "Child 11 | Parent 10 | Child 11\n", "\(app.stdout) \(app.stderr)")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
