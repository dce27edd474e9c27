// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The settings editor (`settings-editor`, `settingsctl edit`): its page driven in headless Chromium against a
/// real broker on a private bus (`Tests/Browser/editor_browser.py`), its refusals, and its lifecycle.
@Suite(.aloneOnTheMachine, .timeLimit(.minutes(5)))
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

    /// `settingsctl edit` with a stand-in for xdg-open (`Tests/Browser/editor_open.py`, first in PATH) that opens
    /// what it is given in headless Chromium: it is given a `file://` page in a folder of the user's, not the
    /// token; no process's arguments or environment hold the token while the browser is logged in; the page is
    /// the user's alone (0600 in a 0700 folder, unreadable to `nobody`) and is gone once the editor has ended.
    @Test func theBrowserIsHandedAFileAndNoProcessShowsTheToken() async throws {
        try await Self.withEditorStore { bus in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("editor-open-\(UUID().uuidString)")
            let runtime = folder.appendingPathComponent("runtime")
            let bin = folder.appendingPathComponent("bin")
            try FileManager.default.createDirectory(
                at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let script = Ctl.repository.appendingPathComponent("Tests/Browser/editor_open.py").path
            let standIn = bin.appendingPathComponent("xdg-open")
            try "#!/bin/sh\nexec /usr/bin/python3 \(script) \"$@\"\n".write(to: standIn, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: standIn.path)
            let path = bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            let environment = bus.environment.merging(["XDG_RUNTIME_DIR": runtime.path, "PATH": path]) { $1 }
            let editor = try RunningProcess.start(
                try Ctl.path(), ["edit", "--bus", bus.address, "/test/editor/"], environment: environment)
            var browser: Int32?
            var pagePath: String?
            do {
                let opened = try await editor.line(where: { $0.hasPrefix("opened: ") }).line
                let words = opened.split(separator: " ").map(String.init)
                browser = Int32(words[1])
                #expect(words.count == 3, "xdg-open is given one argument: \(opened)")
                let url = words.count > 2 ? words[2] : ""
                #expect(url.hasPrefix("file:///"), "xdg-open is given a file, not the editor's address: \(url)")
                let loggedIn = try await editor.line(
                    where: { $0.hasPrefix("logged in: ") || $0.hasPrefix("failed: ") }, timeLimit: .seconds(60)
                ).line
                #expect(loggedIn.hasPrefix("logged in: "), "the page opened from the file logs in: \(loggedIn)")
                #expect(loggedIn.hasSuffix("/"), "and shows the editor: \(loggedIn)")

                // The page: the user's alone, in a folder of the user's alone.
                let file = url.hasPrefix("file://") ? String(url.dropFirst("file://".count)) : ""
                pagePath = file
                var info = stat()
                #expect(lstat(file, &info) == 0, "the page \(file) exists")
                #expect(info.st_mode & S_IFMT == S_IFREG && info.st_mode & 0o777 == 0o600, "the page is 0600")
                #expect(info.st_uid == geteuid(), "the page is the user's")
                let parent = (file as NSString).deletingLastPathComponent
                #expect(parent.hasPrefix(runtime.path + "/"), "the page is under XDG_RUNTIME_DIR: \(parent)")
                var folderInfo = stat()
                #expect(lstat(parent, &folderInfo) == 0)
                #expect(
                    folderInfo.st_mode & S_IFMT == S_IFDIR && folderInfo.st_mode & 0o777 == 0o700
                        && folderInfo.st_uid == geteuid(), "the page's folder is the user's, 0700")
                let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? url
                let token = text.components(separatedBy: "token=").dropFirst().first.map { String($0.prefix(64)) } ?? ""
                #expect(token.count == 64 && token.allSatisfy(\.isHexDigit), "the page holds the token: \(text)")

                // No process's arguments or environment hold the token (root reads every process's).
                if token.count == 64 {
                    let needle = Data(token.utf8)
                    var showing: [String] = []
                    for pid in ProcessTimes.runningPids() {
                        for part in ["cmdline", "environ"] {
                            guard let bytes = FileManager.default.contents(atPath: "/proc/\(pid)/\(part)") else { continue }
                            if bytes.range(of: needle) != nil {
                                let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? "?"
                                showing.append("/proc/\(pid)/\(part) (\(command.trimmingCharacters(in: .whitespacesAndNewlines)))")
                            }
                        }
                    }
                    #expect(showing.isEmpty, "the token is readable in \(showing.joined(separator: ", "))")
                }

                // Another user reads neither the page nor the folder.
                if geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser") {
                    let other = try await TestProcess.run("/usr/sbin/runuser", ["-u", "nobody", "--", "/bin/cat", file])
                    #expect(other.status != 0 && !other.stdout.contains(token), "nobody reads the page: \(other.stdout)")
                    let listing = try await TestProcess.run("/usr/sbin/runuser", ["-u", "nobody", "--", "/bin/ls", parent])
                    #expect(listing.status != 0, "nobody lists the page's folder: \(listing.stdout)")
                }
            } catch {
                if let browser { kill(browser, SIGTERM) }
                _ = await editor.terminate()
                throw error
            }
            if let browser {
                kill(browser, SIGTERM)
                try await editor.line(where: { $0 == "closed" }, timeLimit: .seconds(30))
            }
            #expect(await editor.terminate() == 0)
            if let pagePath, !pagePath.isEmpty {
                #expect(!FileManager.default.fileExists(atPath: pagePath), "the page is removed when the editor ends")
            }
        }
    }

    /// Another user (`nobody`, when the tests run as root) holds 1,100 connections that each sent the start of a
    /// request and no more: the user's own login and data request are still answered within 2 s, the editor
    /// closes every held connection within its time for a request (10 s, with 5 s to spare), and it spends
    /// less than a tenth of the time on the CPU meanwhile.
    @Test func halfOpenConnectionsAreClosedAndThePageStaysAnswered() async throws {
        try await Self.withEditorStore { bus in
            // With the soft limit of open files a desktop session gives its processes (systemd's default, 1024).
            let editor = try RunningProcess.start(
                "/usr/bin/prlimit",
                ["--nofile=1024:", "--", try BuiltProduct.path("settings-editor"), "--no-browser", "--address", bus.address],
                environment: bus.environment)
            let url = try #require(try await editor.nextLine(), "settings-editor printed nothing")
            let port = try #require(URLComponents(string: url)?.port)
            let script = Ctl.repository.appendingPathComponent("Tests/Browser/editor_http.py").path
            let hold = ["/usr/bin/python3", script, "hold", "\(port)", "1100", "30"]
            let other = geteuid() == 0 ? ["/usr/sbin/runuser", "-u", "nobody", "--"] : []
            let holder = try RunningProcess.start((other + hold)[0], Array((other + hold).dropFirst()))
            try await Self.whileRunning(editor) {
                do {
                    let held = try #require(try await holder.nextLine(timeLimit: .seconds(60)))
                    #expect(held.hasPrefix("held "), "\(held)")
                    let clock = ContinuousClock()
                    let start = clock.now
                    let before = try #require(ProcessTimes.read(editor.child.pid))

                    let asked = try await TestProcess.run(
                        "/usr/bin/python3", [script, "ask", url, "/api/dir?path=/test/editor/"], timeLimit: .seconds(90))
                    let answer = asked.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                    let seconds = Double(answer.split(separator: " ").dropFirst(3).first ?? "") ?? .infinity
                    #expect(asked.status == 0 && answer.hasPrefix("answered 200 "), "\(answer) \(asked.stderr)")
                    #expect(seconds < 2, "the user's page is answered within 2 s while the connections are held: \(answer)")

                    let closed = try #require(try await holder.nextLine(timeLimit: .seconds(60)))
                    let after = try #require(ProcessTimes.read(editor.child.pid))
                    let wall = clock.now - start
                    let cpu = after.ownMilliseconds - before.ownMilliseconds
                    let count = held.split(separator: " ").last.map(String.init) ?? "?"
                    #expect(closed.hasPrefix("closed \(count) of \(count),"), "every held connection is closed: \(closed)")
                    let last = Double(closed.split(separator: " ").dropFirst(7).first ?? "") ?? .infinity
                    #expect(last < 15, "the held connections are closed within 15 s: \(closed)")
                    let wallMilliseconds = Double(wall.components.seconds) * 1000 + Double(wall.components.attoseconds) / 1e15
                    print("half-open connections: \(held); \(answer); \(closed); editor CPU \(cpu) ms in \(wallMilliseconds) ms")
                    #expect(cpu < wallMilliseconds / 10, "the editor spent \(cpu) ms of CPU in \(wallMilliseconds) ms")
                } catch {
                    _ = await holder.terminate()
                    throw error
                }
                #expect(await holder.waitForExit() == 0)
            }
            #expect(await editor.terminate() == 0)
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
