// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing

/// The settings editor (`settings-editor`, `settingsctl edit`): its page driven in headless Chromium against a
/// real broker on a private bus (`Tests/Browser/editor_browser.py`), its refusals, and its lifecycle.
@Suite(.timeLimit(.minutes(5)))
struct EditorTests {
    /// The keys the browser test works on: one of each editor, a secret, a locked key, and a key elsewhere.
    static let schema = """
        [/test/editor/]
        tab-width.type=u
        tab-width.default=4
        tab-width.summary=Spaces per tab
        tab-width.description=How many columns a tab stop spans.
        tab-width.range=1,16

        show-tabs.type=b
        show-tabs.default=false
        show-tabs.summary=Show tab characters

        theme.type=s
        theme.default='dark'
        theme.summary=Colour theme
        theme.choices=['light', 'dark', 'high-contrast']

        font-size.type=d
        font-size.default=11
        font-size.summary=Font size in points
        font-size.range=6.0,72.0

        recent-files.type=as
        recent-files.default=[]
        recent-files.summary=Files opened lately

        window.type=(ii)
        window.default=(800, 600)
        window.summary=Window size

        password.type=s
        password.default=''
        password.summary=The sync account's password
        password.secret=true

        locked.type=b
        locked.default=false
        locked.summary=A key the administrator locked

        [/test/other/]
        count.type=i
        count.default=0
        count.summary=A counter elsewhere

        """

    /// A broker on a private bus with the keys of ``schema``, `/test/editor/locked` locked by the
    /// administrator, a secret value and a value elsewhere.
    static func withEditorStore(_ body: (TestBus) async throws -> Void) async throws {
        try await withTestBus { bus in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "editor-test-\(UUID().uuidString)")
            let admin = folder.appendingPathComponent("admin")
            try FileManager.default.createDirectory(
                at: admin.appendingPathComponent("locks.d"), withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            try "/test/editor/locked\n".write(
                to: admin.appendingPathComponent("locks.d/site"), atomically: true, encoding: .utf8)
            let schemaFile = folder.appendingPathComponent("editor.schema")
            try schema.write(to: schemaFile, atomically: true, encoding: .utf8)
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.path])
            _ = try await Ctl.output(bus, ["register", schemaFile.path])
            _ = try await Ctl.output(bus, ["set", "/test/editor/password", "'hunter2'"])
            _ = try await Ctl.output(bus, ["set", "/test/other/count", "3"])
            try await body(bus)
            #expect(await broker.stop() == 0)
        }
    }

    /// Starts `settings-editor --no-browser --address BUS`, and returns it with the URL it printed first.
    static func startEditor(_ bus: TestBus, _ arguments: [String] = []) async throws -> (RunningProcess, String) {
        let editor = try RunningProcess.start(
            try BuiltProduct.path("settings-editor"), ["--no-browser", "--address", bus.address] + arguments,
            environment: bus.environment)
        let line = try #require(try await editor.nextLine(), "settings-editor printed nothing")
        return (editor, line)
    }

    /// The children of a process, from /proc.
    static func children(of pid: Int32) -> [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { candidate in
            guard let stat = try? String(contentsOfFile: "/proc/\(candidate)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 2 && Int32(fields[1]) == pid
        }
    }

    /// Runs `body` with a running editor, and ends the editor however `body` ends.
    static func whileRunning(_ editor: RunningProcess, _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            _ = await editor.terminate()
            throw error
        }
    }

    @Test func theEditorWorksInARealBrowser() async throws {
        for program in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            #expect(
                FileManager.default.isExecutableFile(atPath: program),
                "\(program) is missing: apt-get install chromium chromium-driver python3-selenium")
        }
        try await Self.withEditorStore { bus in
            let (editor, url) = try await Self.startEditor(bus)
            try await Self.whileRunning(editor) {
                #expect(url.hasPrefix("http://127.0.0.1:") && url.contains("/login?token="), "\(url)")
                let screenshot = FileManager.default.temporaryDirectory.appendingPathComponent(
                    "settings-editor-\(UUID().uuidString).png")
                defer { try? FileManager.default.removeItem(at: screenshot) }
                let script = Ctl.repository.appendingPathComponent("Tests/Browser/editor_browser.py").path
                let result = try await TestProcess.run(
                    "/usr/bin/python3", [script, url, try Ctl.path(), bus.address, screenshot.path],
                    environment: bus.environment, timeLimit: .seconds(240))
                #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
                let checks = result.stdout.split(separator: "\n").filter { $0.hasPrefix("ok: ") }
                #expect(checks.count == 24, "\(result.stdout)")
                let picture = try Data(contentsOf: screenshot)
                #expect(picture.starts(with: [0x89, 0x50, 0x4E, 0x47]), "the screenshot is a PNG")
                if let keep = ProcessInfo.processInfo.environment["SETTINGS_EDITOR_SCREENSHOT"] {
                    try? FileManager.default.removeItem(atPath: keep)
                    try FileManager.default.copyItem(at: screenshot, to: URL(fileURLWithPath: keep))
                }
            }
            let clock = ContinuousClock()
            let start = clock.now
            editor.child.signal(SIGTERM)
            let status = await editor.child.waitForExit(within: .seconds(5))
            #expect(clock.now - start < .seconds(5))
            let errors = status == 0 ? "" : await editor.standardError()
            #expect(status == 0, "settings-editor: \(errors)")
        }
    }

    @Test func settingsctlEditServesUntilSIGTERMAndLeavesNoChild() async throws {
        try await Self.withEditorStore { bus in
            let editor = try RunningProcess.start(
                try Ctl.path(), ["edit", "--no-browser", "--bus", bus.address, "/test/editor/"],
                environment: bus.environment)
            try await Self.whileRunning(editor) {
                let url = try #require(try await editor.nextLine())
                #expect(url.hasPrefix("http://127.0.0.1:") && url.contains("/login?token="), "\(url)")
                // The one line is all it prints: the page is served until a signal.
                #expect(Self.children(of: editor.child.pid).isEmpty)
            }
            let clock = ContinuousClock()
            let start = clock.now
            editor.child.signal(SIGTERM)
            let status = await editor.child.waitForExit(within: .seconds(5))
            #expect(clock.now - start < .seconds(5))
            #expect(status == 0)
            #expect(Self.children(of: editor.child.pid).isEmpty)
        }
    }

    /// The raw bytes of `/api/events` while another process changes the secret key and then an ordinary one:
    /// the secret's change is told, its value is not (only Reveal gives it).
    @Test func aSecretKeysChangeIsToldWithoutItsValue() async throws {
        try await Self.withEditorStore { bus in
            let (editor, url) = try await Self.startEditor(bus)
            try await Self.whileRunning(editor) {
                let script = Ctl.repository.appendingPathComponent("Tests/Browser/editor_http.py").path
                let result = try await TestProcess.run(
                    "/usr/bin/python3", [script, "events", url, try Ctl.path(), bus.address],
                    environment: bus.environment, timeLimit: .seconds(60))
                #expect(result.status == 0, "\(result.stderr)")
                let raw = result.stdout
                #expect(raw.contains("\"/test/editor/password\""), "the secret key's change is told: \(raw)")
                #expect(!raw.contains("hunter3"), "a secret value left the editor outside Reveal: \(raw)")
                #expect(raw.contains("'light'"), "an ordinary key's change carries its value: \(raw)")
            }
            #expect(await editor.terminate() == 0)
        }
    }

    @Test func theEditorNamesAMissingBrokerAndABadDirectory() async throws {
        try await withTestBus { bus in
            let editor = try BuiltProduct.path("settings-editor")
            let missing = try await TestProcess.run(
                editor, ["--no-browser", "--address", bus.address], environment: bus.environment)
            #expect(missing.status == 5)
            #expect(missing.stderr.contains("the broker cannot be reached"), "\(missing.stderr)")
            #expect(missing.stdout.isEmpty)
            let bad = try await TestProcess.run(
                editor, ["--no-browser", "--address", bus.address, "no-slash"], environment: bus.environment)
            #expect(bad.status == 64, "\(bad.stderr)")
            #expect(bad.stderr.contains("is not a directory"), "\(bad.stderr)")
            try await Ctl.failure(
                bus, ["edit", "--no-browser", "/not a dir/"], status: 4, message: "invalid directory")
        }
    }

    @Test func theEmbeddedPageIsTheFilesOfPage() throws {
        let folder = Ctl.repository.appendingPathComponent("Sources/settings-editor")
        let embedded = try String(contentsOf: folder.appendingPathComponent("Page+Files.swift"), encoding: .utf8)
        for file in ["index.html", "editor.js", "editor.css"] {
            let text = try String(contentsOf: folder.appendingPathComponent("Page/\(file)"), encoding: .utf8)
            #expect(
                embedded.contains("##\"\"\"\n" + text + "\"\"\"##"),
                "Page/\(file) differs from Page+Files.swift: run scripts/embed-editor-page")
        }
    }
}
