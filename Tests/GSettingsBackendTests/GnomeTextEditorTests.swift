// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// What running a GNOME app in a test takes.
enum GnomeDesktop {
    /// The programs the test runs, with their Debian packages.
    static let programs = [
        "/usr/bin/gnome-text-editor": "gnome-text-editor", "/usr/bin/Xvfb": "xvfb", "/usr/bin/xdotool": "xdotool",
        "/usr/bin/xwd": "x11-apps",
    ]

    /// Why the test cannot run here: the packages to install.
    static var missing: String? {
        let absent = programs.filter { !FileManager.default.isExecutableFile(atPath: $0.key) }.values.sorted()
        return absent.isEmpty ? nil : "GNOME's Text Editor is not tried: apt-get install -y \(absent.joined(separator: " "))"
    }
}

/// A failure of the test's own tools (the X server, a picture).
struct DesktopFailure: Error, CustomStringConvertible {
    let description: String
}

/// GNOME's own Text Editor (Debian's `gnome-text-editor`, GTK 4 and libadwaita) on the GIO module, under Xvfb, on a
/// private bus with the broker: its window is seen, by its pixels, to follow a change made from outside; a change it
/// makes itself reaches `settingsctl watch` as its own; it starts with the values of a dconf dump loaded by
/// `settingsctl load`; and it starts and draws its window with the broker stopped. The pictures are kept in
/// `.build/gnome-text-editor/` (PNG).
@Suite(
    .aloneOnTheMachine,
    .timeLimit(.minutes(3)),
    .enabled(if: GnomeDesktop.missing == nil, "\(GnomeDesktop.missing ?? "")"))
struct GnomeTextEditorTests {
    typealias Setup = GSettingsBackendTests.Setup

    /// Where the pictures are kept: `.build/gnome-text-editor/` in the repository.
    static let pictures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/gnome-text-editor")

    static let directory = "/org/gnome/TextEditor/"

    /// An X server of its own (Xvfb, on the display number it picked), ended with the test.
    static func startDisplay() async throws -> (RunningProcess, String) {
        let server = try RunningProcess.start(
            "/usr/bin/Xvfb", ["-displayfd", "1", "-screen", "0", "1024x768x24", "-nolisten", "tcp"], environment: [:])
        guard let number = try await server.nextLine(timeLimit: .seconds(30)), Int(number) != nil else {
            _ = await server.terminate()
            throw DesktopFailure(description: "Xvfb did not start: \(await server.standardError())")
        }
        return (server, ":" + number)
    }

    /// Starts the editor and waits until its main window is shown; returns it and the window's id.
    static func startEditor(_ environment: [String: String]) async throws -> (RunningProcess, String) {
        let editor = try RunningProcess.start("/usr/bin/gnome-text-editor", ["--standalone"], environment: environment)
        let window = try await Self.window(named: "Text Editor", environment)
        return (editor, window)
    }

    /// The id of the first shown window whose name contains `name` (xdotool waits for it, 30 s at most).
    static func window(named name: String, _ environment: [String: String]) async throws -> String {
        let search = try await TestProcess.run(
            "/usr/bin/xdotool", ["search", "--sync", "--onlyvisible", "--name", name], environment: environment,
            timeLimit: .seconds(30))
        return try #require(search.stdout.split(separator: "\n").first.map(String.init), "no window \(name): \(search.stderr)")
    }

    /// A picture of a window, now.
    static func picture(of window: String, _ environment: [String: String]) async throws -> WindowPicture {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("window-\(UUID().uuidString).xwd")
        defer { try? FileManager.default.removeItem(at: file) }
        let shot = try await TestProcess.run(
            "/usr/bin/xwd", ["-silent", "-id", window, "-out", file.path], environment: environment)
        guard shot.status == 0, let picture = WindowPicture(xwd: try Data(contentsOf: file)) else {
            throw DesktopFailure(description: "xwd of window \(window) failed: \(shot.stderr)")
        }
        return picture
    }

    /// The first picture of a window that `accept`s within `limit` (the window drawn again); the last one taken
    /// when none did.
    static func picture(
        of window: String, _ environment: [String: String], within limit: Duration,
        where accept: (WindowPicture) -> Bool
    ) async throws -> (picture: WindowPicture, accepted: Bool) {
        let deadline = ContinuousClock.now + limit
        var last = try await picture(of: window, environment)
        while !accept(last) {
            guard ContinuousClock.now < deadline else { return (last, false) }
            last = try await picture(of: window, environment)
        }
        return (last, true)
    }

    /// A picture of the window once it is drawn and stays so: two pictures in a row alike (10 s at most).
    static func settled(_ window: String, _ environment: [String: String]) async throws -> WindowPicture {
        var previous = try await picture(of: window, environment)
        let (picture, settled) = try await Self.picture(of: window, environment, within: .seconds(10)) { next in
            defer { previous = next }
            return next == previous && next.brightness > 0.01
        }
        #expect(settled, "the window did not settle in 10 s")
        return picture
    }

    /// Keeps a picture as `.build/gnome-text-editor/NAME.png`.
    static func keep(_ picture: WindowPicture, _ name: String) {
        try? FileManager.default.createDirectory(at: pictures, withIntermediateDirectories: true)
        try? picture.png.write(to: pictures.appendingPathComponent(name + ".png"))
    }

    /// Whether the dark window shows the first line's number: light pixels in the gutter, left of where the
    /// text begins when there is none (the editor's layout in Debian 12: the digit at x 25–31, y 67–79).
    static func lineNumberShown(_ picture: WindowPicture) -> Bool {
        picture.brightest(columns: 20..<40, rows: 60..<88) > 0.4
    }

    static func settingsctl(_ arguments: [String], _ bus: TestBus, input: String? = nil) async throws {
        let run = try await TestProcess.run(
            try BuiltProduct.path("settingsctl"), Array(arguments.prefix(1)) + ["--bus", bus.address] + arguments.dropFirst(),
            environment: bus.environment, input: input)
        #expect(run.status == 0, "settingsctl \(arguments.joined(separator: " ")): \(run.stderr)")
    }

    @Test func theTextEditorFollowsTheBrokerWritesThroughItAndStartsWithoutIt() async throws {
        let setup = try await Setup.compiled()
        defer { setup.remove() }
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("text-editor-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: home) }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let (display, name) = try await Self.startDisplay()
            defer { display.child.signal(SIGTERM) }
            var environment = setup.environment(bus, viewOf: broker)
            for (variable, folder) in [("HOME", ""), ("XDG_CONFIG_HOME", "config"), ("XDG_DATA_HOME", "data"),
                                       ("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state")] {
                environment[variable] = home.appendingPathComponent(folder).path
            }
            // X11 drawn by the CPU, no accessibility bus: what Xvfb offers.
            environment.merge(["DISPLAY": name, "GDK_BACKEND": "x11", "GSK_RENDERER": "cairo", "GTK_A11Y": "none",
                               "NO_AT_BRIDGE": "1"]) { _, new in new }
            // GTK reads its own settings through the module too: a cursor that does not blink, so that a window
            // drawn again is alike.
            try await Self.settingsctl(["set", "/org/gnome/desktop/interface/cursor-blink", "false"], bus)

            // A change from outside redraws the running window within a second: the light style, then the dark.
            var (editor, window) = try await Self.startEditor(environment)
            let light = try await Self.settled(window, environment)
            Self.keep(light, "1-light")
            #expect(light.brightness > 0.6, "the window is light at first: \(light.brightness)")
            try await Self.settingsctl(["set", Self.directory + "style-variant", "'dark'"], bus)
            let dark = try await Self.picture(of: window, environment, within: .seconds(1)) {
                $0.brightness < light.brightness - 0.3
            }
            Self.keep(dark.picture, "2-dark")
            #expect(dark.accepted, "the window did not turn dark within 1 s: \(dark.picture.brightness)")
            let darkSettled = try await Self.settled(window, environment)
            try await Self.settingsctl(["set", Self.directory + "show-line-numbers", "true"], bus)
            let numbered = try await Self.picture(of: window, environment, within: .seconds(1)) {
                $0.pixelsDiffering(from: darkSettled) > 20 && $0.brightness < light.brightness - 0.3
            }
            Self.keep(numbered.picture, "3-dark-line-numbers")
            #expect(numbered.accepted, "the line numbers did not appear within 1 s")

            // A change the app makes itself, in its preferences with the keyboard, reaches settingsctl watch as
            // the app's own: its origin is the app's connection.
            let watch = try RunningProcess.start(
                try BuiltProduct.path("settingsctl"), ["watch", "--bus", bus.address, "--json", "--initial", Self.directory],
                environment: bus.environment)
            _ = try await watch.line(where: { $0.contains("\"initial\"") })
            let keys = { (arguments: [String]) async throws in
                let run = try await TestProcess.run("/usr/bin/xdotool", arguments, environment: environment)
                #expect(run.status == 0, "xdotool \(arguments.joined(separator: " ")): \(run.stderr)")
            }
            try await keys(["windowfocus", "--sync", window])
            try await keys(["key", "ctrl+comma"])
            let preferences = try await Self.window(named: "Preferences", environment)
            try await keys(["windowfocus", "--sync", preferences])
            try await keys(["key", "Tab", "space"])
            let changed = try await watch.line(where: { $0.contains("style-scheme") }, timeLimit: .seconds(10)).line
            let json = try #require(try JSONSerialization.jsonObject(with: Data(changed.utf8)) as? [String: Any])
            let origin = try #require(json["origin"] as? String, "\(changed)")
            let connection = try await bus.connect()
            let pid = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetConnectionUnixProcessID", arguments: [.string(origin)])
            #expect(pid == [.uint32(UInt32(editor.child.pid))], "\(changed)")
            await connection.close()
            _ = await watch.terminate()
            _ = await editor.terminate()

            // A dconf dump of its keys, loaded by settingsctl: the app starts with those values.
            try await Self.settingsctl(["reset", "-r", Self.directory], bus)
            try await Self.settingsctl(
                ["load", Self.directory], bus, input: "[/]\nstyle-variant='dark'\nshow-line-numbers=true\n")
            (editor, window) = try await Self.startEditor(environment)
            let loaded = try await Self.settled(window, environment)
            Self.keep(loaded, "4-started-from-a-dump")
            #expect(loaded.brightness < light.brightness - 0.3, "the app did not start dark: \(loaded.brightness)")
            #expect(Self.lineNumberShown(loaded) && !Self.lineNumberShown(darkSettled), "no line number")
            _ = await editor.terminate()

            // With the broker stopped, the app starts and draws its window, with the values it stored (the view).
            try await broker.pause()
            let clock = ContinuousClock()
            let start = clock.now
            (editor, window) = try await Self.startEditor(environment)
            let stopped = try await Self.settled(window, environment)
            Self.keep(stopped, "5-broker-stopped")
            #expect(clock.now - start < .seconds(10), "\(clock.now - start)")
            #expect(stopped.brightness < light.brightness - 0.3, "the app did not start dark: \(stopped.brightness)")
            #expect(Self.lineNumberShown(stopped), "no line number")
            broker.process.signal(SIGCONT)
            _ = await editor.terminate()
            let log = await editor.standardError()
            #expect(!log.contains("settingsbus:"), "\(log)")
            #expect(await broker.stop() == 0)
        }
    }
}
