// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import Glibc
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// Sandboxed apps, in sandboxes that Debian's `bubblewrap` builds the way Flatpak does (a pid namespace, a root of
/// their own, a private `/.flatpak-info`), reaching the real broker on a private bus through `xdg-dbus-proxy` run
/// inside the sandbox, or through the bus socket itself. The app inside is `Tests/Peers/sandboxed_app.py`.
///
/// The tests run one at a time: the pid-reuse test sets the kernel's next pid, which another of them starting
/// processes would take.
@Suite(.sharingTheMachine, .serialized, .timeLimit(.minutes(3)))
struct SandboxedAppTests {
    static let sandboxedName = SettingsBusNames.sandboxedBusName.rawValue
    static let mainName = SettingsBusNames.busName.rawValue

    /// What the sandbox's `/.flatpak-info` is.
    enum Info {
        case application(String)
        case runtime(String)
        case missing
        /// A symbolic link to a valid `[Application]` file.
        case symbolicLink(String)
    }

    /// An app running in a sandbox, answering commands (`sandboxed_app.py`).
    struct SandboxedApp {
        let process: RunningProcess
        let folder: URL

        /// Runs a command and returns its answer.
        func run(_ command: [String: Any]) async throws -> [String: Any] {
            let data = try JSONSerialization.data(withJSONObject: command)
            process.write(String(decoding: data, as: UTF8.self) + "\n")
            guard let line = try await process.nextLine(timeLimit: .seconds(60)) else {
                throw SandboxFailure(description: "the sandboxed app ended: \(await process.standardError())")
            }
            return try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }

        /// Calls a method of the settings interface on `name`.
        func call(_ method: String, _ signature: String = "", _ arguments: String = "()", on name: String = sandboxedName)
            async throws -> [String: Any]
        {
            try await run(["op": "call", "name": name, "method": method, "signature": signature, "args": arguments])
        }

        func stop() async {
            process.closeInput()
            _ = await process.waitForExit()
            try? FileManager.default.removeItem(at: folder)
        }
    }

    /// Starts `sandboxed_app.py` in a bubblewrap sandbox with its own pid namespace and root, the test bus's
    /// folder bound in, and `/.flatpak-info` as `info` says.
    static func sandbox(_ bus: TestBus, info: Info, readOnly: [String] = []) throws -> SandboxedApp {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-sandbox-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let infoFile = folder.appendingPathComponent("flatpak-info")
        var arguments = [
            "--unshare-pid", "--die-with-parent", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--tmpfs", "/run", "--dir", "/run/sandbox",
            "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/sbin", "/sbin",
            "--bind", bus.directory.path, bus.directory.path,
            "--ro-bind", Peers.script("sandboxed_app.py"), "/app/sandboxed_app.py",
        ]
        switch info {
        case .application(let id):
            try "[Application]\nname=\(id)\nruntime=runtime/org.example.Platform/x86_64/1\n\n[Instance]\ninstance-id=1\n"
                .write(to: infoFile, atomically: true, encoding: .utf8)
            arguments += ["--ro-bind", infoFile.path, "/.flatpak-info"]
        case .runtime(let id):
            try "[Runtime]\nname=\(id)\nruntime=runtime/\(id)/x86_64/1\n".write(
                to: infoFile, atomically: true, encoding: .utf8)
            arguments += ["--ro-bind", infoFile.path, "/.flatpak-info"]
        case .missing:
            break
        case .symbolicLink(let id):
            try "[Application]\nname=\(id)\n".write(to: infoFile, atomically: true, encoding: .utf8)
            arguments += ["--ro-bind", infoFile.path, "/run/info", "--symlink", "/run/info", "/.flatpak-info"]
        }
        for folder in readOnly { arguments += ["--ro-bind", folder, folder] }
        arguments += ["/usr/bin/python3", "-u", "/app/sandboxed_app.py"]
        let process = try RunningProcess.start("/usr/bin/bwrap", arguments)
        return SandboxedApp(process: process, folder: folder)
    }

    static func errorName(_ answer: [String: Any]) -> String? {
        (answer["error"] as? String).map { $0.replacingOccurrences(of: SettingsBusNames.errorPrefix, with: "") }
    }

    /// The host's writes the tests start from: the app's own key, another app's, and a shared one.
    static func seed(_ bus: TestBus) async throws {
        let connection = try await bus.connect()
        for (key, value) in [
            ("/org/example/Editor/font-size", DBusValue.int32(12)),
            ("/org/other/Mail/password-hint", .string("the other app's")),
            ("/org/freedesktop/appearance/color-scheme", .uint32(1)),
        ] {
            _ = try await connection.settings("Set", [.string(key), .variant(value)])
        }
        await connection.close()
    }

    @Test func anAppThroughAProxyInItsSandboxReachesOnlyItsOwnKeysAndTheSharedOnes() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Self.seed(bus)
            let app = try Self.sandbox(bus, info: .application("org.example.Editor"))
            let proxied = try await app.run(["op": "proxy", "address": bus.address, "talk": [Self.sandboxedName]])
            #expect(proxied["ok"] != nil, "\(proxied)")

            // Its own subtree: read, written, registered, reset.
            #expect(try await app.call("Get", "s", "('/org/example/Editor/font-size',)")["ok"] != nil)
            #expect(
                try await app.call("Set", "sv", "('/org/example/Editor/font-size', dbus.Int32(14, variant_level=1))")[
                    "ok"] != nil)
            #expect(try await app.call("ReadTree", "s", "('/org/example/Editor/',)")["ok"] != nil)
            #expect(try await app.call("ReadTreeLayers", "s", "('/org/example/Editor/',)")["ok"] != nil)
            #expect(try await app.call("List", "s", "('/org/example/',)").keys.contains("error"))
            // The shared keys: read, not written.
            #expect(try await app.call("Get", "s", "('/org/freedesktop/appearance/color-scheme',)")["ok"] != nil)
            #expect(try await app.call("ReadTree", "s", "('/org/freedesktop/appearance/',)")["ok"] != nil)
            let sharedWrite = try await app.call(
                "Set", "sv", "('/org/freedesktop/appearance/color-scheme', dbus.UInt32(2, variant_level=1))")
            #expect(Self.errorName(sharedWrite) == "AccessDenied", "\(sharedWrite)")

            // Everything else is refused by name.
            for (method, signature, arguments) in [
                ("Get", "s", "('/org/other/Mail/password-hint',)"),
                ("GetMany", "as", "(['/org/example/Editor/font-size', '/org/other/Mail/password-hint'],)"),
                ("ReadTree", "s", "('/',)"),
                ("ReadTreeWithoutSchemaDefaults", "s", "('/org/',)"),
                ("ReadTreeLayers", "s", "('/',)"),
                ("List", "s", "('/',)"),
                ("Locks", "s", "('/org/',)"),
                ("Describe", "s", "('/org/other/Mail/password-hint',)"),
                ("History", "stxu", "('/', 0, 0, 0)"),
                ("Set", "sv", "('/org/other/Mail/password-hint', dbus.String('mine', variant_level=1))"),
                ("Reset", "s", "('/org/other/',)"),
                (
                    "Apply", "a{sv}asa{sv}",
                    "({'/org/example/Editor/font-size': dbus.Int32(20, variant_level=1), '/org/other/Mail/x': dbus.Int32(1, variant_level=1)}, [], {})"
                ),
            ] {
                let answer = try await app.call(method, signature, arguments)
                #expect(Self.errorName(answer) == "AccessDenied", "\(method): \(answer)")
                let message = answer["message"] as? String ?? ""
                #expect(message.contains("org.example.Editor"), "\(method): \(message)")
            }
            // The refused Apply wrote nothing, not even the key it may write.
            let host = try await bus.connect()
            let size = try await host.settings("Get", [.string("/org/example/Editor/font-size")])
            #expect(size == [.variant(.int32(14))])
            // Status says only whether the broker serves.
            let status = try await app.call("Status")
            let fields = try #require(status["ok"] as? [String: Any], "\(status)")
            #expect(Set(fields.keys).isSubset(of: ["health", "writable"]), "\(fields.keys)")
            // Through the proxy, the main name is not there at all.
            #expect(try await app.call("Get", "s", "('/org/example/Editor/font-size',)", on: Self.mainName)["error"] != nil)

            await host.close()
            await app.stop()
            _ = await broker.stop()
        }
    }

    /// Apps whose ids name a shared directory, or a directory above shared keys, read the shared keys and write
    /// none of them, whole directory or key; an id of fewer than three elements proves no app (as with Flatpak).
    @Test func anAppWhoseIdNamesASharedDirectoryWritesNoneOfIt() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Self.seed(bus)
            let host = try await bus.connect()
            _ = try await host.settings("Set", [.string("/org/gnome/desktop/interface/color-scheme"), .variant(.string("default"))])
            for (id, writes, refused) in [
                (
                    "org.freedesktop.appearance", [String](),
                    [
                        ("Set", "sv", "('/org/freedesktop/appearance/color-scheme', dbus.UInt32(2, variant_level=1))"),
                        ("Reset", "s", "('/org/freedesktop/appearance/color-scheme',)"),
                        ("Reset", "s", "('/org/freedesktop/appearance/',)"),
                        (
                            "Register", "ssva{sv}",
                            "('/org/freedesktop/appearance/color-scheme', 'u', dbus.UInt32(0, variant_level=1), {})"
                        ),
                    ]
                ),
                (
                    "org.gnome.desktop.interface", ["/org/gnome/desktop/interface/clock-format"],
                    [
                        ("Set", "sv", "('/org/gnome/desktop/interface/color-scheme', dbus.String('prefer-dark', variant_level=1))"),
                        ("Reset", "s", "('/org/gnome/desktop/interface/',)"),
                        (
                            "Apply", "a{sv}asa{sv}",
                            "({}, ['/org/gnome/desktop/interface/color-scheme'], {})"
                        ),
                    ]
                ),
                ("org.gnome.desktop", ["/org/gnome/desktop/session/idle-delay"], [("Reset", "s", "('/org/gnome/desktop/',)")]),
            ] {
                let app = try Self.sandbox(bus, info: .application(id))
                _ = try await app.run(["op": "proxy", "address": bus.address, "talk": [Self.sandboxedName]])
                let read = try await app.call("Get", "s", "('/org/freedesktop/appearance/color-scheme',)")
                #expect(read["ok"] != nil, "\(id): \(read)")
                for key in writes {
                    let own = try await app.call("Set", "sv", "('\(key)', dbus.String('x', variant_level=1))")
                    #expect(own["ok"] != nil, "\(id) \(key): \(own)")
                }
                for (method, signature, arguments) in refused {
                    let answer = try await app.call(method, signature, arguments)
                    #expect(Self.errorName(answer) == "AccessDenied", "\(id) \(method) \(arguments): \(answer)")
                }
                await app.stop()
            }
            // The shared keys are as the host left them.
            #expect(try await host.settings("Get", [.string("/org/freedesktop/appearance/color-scheme")]) == [.variant(.uint32(1))])
            #expect(
                try await host.settings("Get", [.string("/org/gnome/desktop/interface/color-scheme")]) == [
                    .variant(.string("default"))
                ])
            // An id of two elements proves no app.
            let short = try Self.sandbox(bus, info: .application("org.freedesktop"))
            _ = try await short.run(["op": "proxy", "address": bus.address, "talk": [Self.sandboxedName]])
            let answer = try await short.call("Get", "s", "('/org/freedesktop/appearance/color-scheme',)")
            #expect(Self.errorName(answer) == "AccessDenied", "\(answer)")
            #expect((answer["message"] as? String ?? "").contains("at least three"), "\(answer)")
            await short.stop()
            await host.close()
            _ = await broker.stop()
        }
    }

    @Test func throughAProxyAnAppGetsItsOwnChangesAndNoOtherAppsBroadcast() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Self.seed(bus)
            let app = try Self.sandbox(bus, info: .application("org.example.Editor"))
            _ = try await app.run(["op": "proxy", "address": bus.address, "talk": [Self.sandboxedName]])
            #expect(try await app.run(["op": "watch"])["ok"] != nil)
            // Its first call makes it known to the broker as a sandboxed caller of its name.
            #expect(try await app.call("Get", "s", "('/org/example/Editor/font-size',)")["ok"] != nil)

            // When: the host changes another app's key, a shared key, then the app's own key.
            let host = try await bus.connect()
            _ = try await host.settings("Set", [.string("/org/other/Mail/password-hint"), .variant(.string("changed"))])
            _ = try await host.settings("Set", [.string("/org/freedesktop/appearance/color-scheme"), .variant(.uint32(2))])
            _ = try await host.settings("Set", [.string("/org/example/Editor/font-size"), .variant(.int32(16))])
            let waited = try await app.run(["op": "wait", "key": "/org/example/Editor/font-size", "seconds": 30])
            #expect(waited["seen"] as? Bool == true, "\(waited)")
            // Then: it got its own change and the shared one, each sent to it alone, and nothing of the other app.
            let signals = try #require(waited["signals"] as? [[String: Any]])
            let text = "\(signals)"
            #expect(!text.contains("/org/other"), "\(text)")
            #expect(text.contains("/org/freedesktop/appearance/color-scheme"), "\(text)")
            for signal in signals where signal["member"] as? String == "Changed" {
                #expect(signal["destination"] as? String != nil, "a broadcast reached the sandbox: \(signal)")
            }

            await host.close()
            await app.stop()
            _ = await broker.stop()
        }
    }

    /// The Swift library inside a Flatpak sandbox calls the sandboxed apps' name: `settingsctl`, run in the
    /// sandbox with a proxy that lets it talk to that name alone, reads the app's key and is refused another's.
    @Test func theLibraryInASandboxCallsTheSandboxedAppsName() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Self.seed(bus)
            let settingsctl = try BuiltProduct.path("settingsctl")
            let app = try Self.sandbox(
                bus, info: .application("org.example.Editor"),
                readOnly: ["/opt", URL(fileURLWithPath: settingsctl).deletingLastPathComponent().path])
            _ = try await app.run(["op": "proxy", "address": bus.address, "talk": [Self.sandboxedName]])
            let own = try await app.run(["op": "exec", "argv": [settingsctl, "get", "/org/example/Editor/font-size"]])
            #expect(own["status"] as? Int == 0, "\(own)")
            #expect((own["stdout"] as? String)?.hasPrefix("12") == true, "\(own)")
            let other = try await app.run(["op": "exec", "argv": [settingsctl, "get", "/org/other/Mail/password-hint"]])
            #expect(other["status"] as? Int == 8, "\(other)")
            #expect((other["stderr"] as? String)?.contains("org.example.Editor") == true, "\(other)")
            await app.stop()
            _ = await broker.stop()
        }
    }

    /// The host stays in charge: the administrator's lock holds for the app's own key, and the administrator's
    /// and the user's `sandbox-shared` decide which shared keys it reads.
    @Test func theAdministratorsLocksAndSharedKeysHoldForASandboxedApp() async throws {
        let admin = try AdministratorTests.AdminFolder()
        defer { admin.root.remove() }
        try admin.write("/org/example/Editor/locked\n", to: "locks.d/site")
        try admin.write("/org/example/Shared/\n", to: "sandbox-shared")
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            try await Self.seed(bus)
            let host = try await bus.connect()
            _ = try await host.settings("Set", [.string("/org/example/Shared/theme"), .variant(.string("dark"))])
            _ = try await host.settings("Set", [.string("/org/example/Personal/theme"), .variant(.string("blue"))])
            let app = try Self.sandbox(bus, info: .application("org.example.Editor"))
            _ = try await app.run(["op": "connect", "address": bus.address])
            let locked = try await app.call("Set", "sv", "('/org/example/Editor/locked', dbus.Int32(1, variant_level=1))")
            #expect(Self.errorName(locked) == "NotWritable", "\(locked)")
            #expect(try await app.call("Get", "s", "('/org/example/Shared/theme',)")["ok"] != nil)
            // The administrator's list replaced the default one: the appearance is not shared any more.
            let appearance = try await app.call("Get", "s", "('/org/freedesktop/appearance/color-scheme',)")
            #expect(Self.errorName(appearance) == "AccessDenied", "\(appearance)")
            // The user adds a key beside the store file; it is in force within a second (read again on change).
            try "/org/example/Personal/theme\n".write(
                toFile: URL(fileURLWithPath: broker.storePath).deletingLastPathComponent()
                    .appendingPathComponent("sandbox-shared").path, atomically: true, encoding: .utf8)
            let deadline = ContinuousClock.now + .seconds(10)
            var personal = try await app.call("Get", "s", "('/org/example/Personal/theme',)")
            while personal["ok"] == nil, ContinuousClock.now < deadline {
                personal = try await app.call("Get", "s", "('/org/example/Personal/theme',)")
            }
            #expect(personal["ok"] != nil, "\(personal)")
            await host.close()
            await app.stop()
            _ = await broker.stop()
        }
    }

    @Test func aSandboxGivenTheBusSocketIsStillConfinedOnTheMainName() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Self.seed(bus)
            let app = try Self.sandbox(bus, info: .application("org.example.Editor"))
            _ = try await app.run(["op": "connect", "address": bus.address])
            let own = try await app.call("Get", "s", "('/org/example/Editor/font-size',)", on: Self.mainName)
            #expect(own["ok"] != nil, "\(own)")
            let other = try await app.call("Get", "s", "('/org/other/Mail/password-hint',)", on: Self.mainName)
            #expect(Self.errorName(other) == "AccessDenied", "\(other)")
            await app.stop()
            _ = await broker.stop()
        }
    }

    @Test(arguments: [
        (Info.missing, "/.flatpak-info cannot be opened"),
        (Info.symbolicLink("org.example.Editor"), "symbolic link"),
        (Info.runtime("org.example.Platform"), "runtime"),
    ])
    func aSandboxThatCannotProveItsAppIsRefusedEverything(info: Info, reason: String) async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Self.seed(bus)
            // Through a proxy in the sandbox, and with the bus socket itself.
            for how in ["proxy", "connect"] {
                let app = try Self.sandbox(bus, info: info)
                _ = try await app.run(["op": how, "address": bus.address, "talk": [Self.sandboxedName]])
                for key in ["/org/example/Editor/font-size", "/org/freedesktop/appearance/color-scheme"] {
                    let answer = try await app.call("Get", "s", "('\(key)',)")
                    #expect(Self.errorName(answer) == "AccessDenied", "\(how) \(info): \(answer)")
                    let message = answer["message"] as? String ?? ""
                    #expect(message.contains("cannot be identified") && message.contains(reason), "\(message)")
                }
                await app.stop()
            }
            _ = await broker.stop()
        }
    }

    /// The real `xdg-desktop-portal` on the private bus, with the broker as its Settings backend
    /// (`dbus/settingsbus.portal`): a sandboxed app that may talk only to the portal reads the host's colour
    /// scheme through it, and sees it change when a host app sets the key; a write of the same value again is
    /// not announced.
    @Test func theDesktopPortalGivesASandboxedAppTheHostsColorScheme() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            try await Self.seed(bus)
            let portals = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-portals-\(UUID())")
            try FileManager.default.createDirectory(at: portals, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: portals) }
            try FileManager.default.copyItem(
                at: Peers.repository.appendingPathComponent("dbus/settingsbus.portal"),
                to: portals.appendingPathComponent("settingsbus.portal"))
            let portal = try RunningProcess.start(
                "/usr/libexec/xdg-desktop-portal", ["--replace"],
                environment: bus.environment.merging([
                    "XDG_DESKTOP_PORTAL_DIR": portals.path, "XDG_CURRENT_DESKTOP": "SettingsBus",
                ]) { $1 })
            let waited = try await TestProcess.run(
                Peers.gdbusPath, ["wait", "--session", "--timeout", "60", "org.freedesktop.portal.Desktop"],
                environment: bus.environment, timeLimit: .seconds(90))
            #expect(waited.status == 0, "\(waited.stderr)")

            let app = try Self.sandbox(bus, info: .application("org.example.Editor"))
            _ = try await app.run(["op": "proxy", "address": bus.address, "talk": ["org.freedesktop.portal.Desktop"]])
            _ = try await app.run(["op": "watch"])
            let read: [String: Any] = try await app.run([
                "op": "call", "name": "org.freedesktop.portal.Desktop", "path": "/org/freedesktop/portal/desktop",
                "interface": "org.freedesktop.portal.Settings", "method": "Read", "signature": "ss",
                "args": "('org.freedesktop.appearance', 'color-scheme')",
            ])
            #expect("\(read["ok"] ?? read)" == "1", "\(read)")

            // When: a host app sets the key, the same value again, then another key of the namespace.
            let host = try await bus.connect()
            for (key, value) in [("color-scheme", 2), ("color-scheme", 2), ("contrast", 1)] {
                _ = try await host.settings(
                    "Set", [.string("/org/freedesktop/appearance/\(key)"), .variant(.uint32(UInt32(value)))])
            }
            let changed = try await app.run(["op": "wait", "member": "SettingChanged", "key": "contrast", "seconds": 30])
            #expect(changed["seen"] as? Bool == true, "\(changed)")
            // Then: one SettingChanged for the colour scheme, with its new value, and one for the contrast.
            let signals = try #require(changed["signals"] as? [[String: Any]])
            let schemes = signals.filter {
                $0["member"] as? String == "SettingChanged" && "\($0["body"] ?? "")".contains("color-scheme")
            }
            #expect(schemes.count == 1, "\(signals)")
            let body = "\(schemes.first?["body"] ?? "")"
            #expect(body.contains("2"), "\(schemes)")

            // When: the host resets the key, which leaves it out of what the backend serves.
            _ = try await app.run(["op": "forget"])
            _ = try await host.settings("Reset", [.string("/org/freedesktop/appearance/color-scheme")])
            let reset = try await app.run(["op": "wait", "member": "SettingChanged", "key": "color-scheme", "seconds": 30])
            // Then: the app hears the value it now reads, the portal's default, no preference (0).
            #expect(reset["seen"] as? Bool == true, "\(reset)")
            let resetBodies = try #require(reset["signals"] as? [[String: Any]]).map { "\($0["body"] ?? "")" }
            #expect(resetBodies.contains { $0.contains("color-scheme") && $0.hasSuffix("0]") }, "\(resetBodies)")

            await host.close()
            await app.stop()
            _ = await portal.terminate()
            _ = await broker.stop()
        }
    }

    /// A client connects from the sandbox, forks a child that keeps the connection, and exits; the test gives its
    /// pid to a new process on the host (`ns_last_pid`). Whether or not it called before, the child is refused
    /// what the app may not reach: its identity was proved at its first call, or the process now behind the pid
    /// started after the connection appeared.
    @Test(
        .enabled(
            if: access("/proc/sys/kernel/ns_last_pid", W_OK) == 0,
            "giving a pid to a chosen process sets the kernel's next pid, which only root may"),
        arguments: [true, false])
    func aConnectionWhosePidIsReusedByAHostProcessGainsNothing(calledFirst: Bool) async throws {
        try await Self.reuseThePidOfAConnection(calledFirst: calledFirst, restart: .never)
    }

    /// The same after the broker restarts between the connection and the reuse: the new broker never saw the
    /// name appear, and bounds it by the moment it began following names, not by the moment of its call.
    @Test(
        .enabled(
            if: access("/proc/sys/kernel/ns_last_pid", W_OK) == 0,
            "giving a pid to a chosen process sets the kernel's next pid, which only root may"))
    func aConnectionWhosePidIsReusedAfterTheBrokerRestartedGainsNothing() async throws {
        try await Self.reuseThePidOfAConnection(calledFirst: false, restart: .beforeTheReuse)
    }

    /// The same when the pid is reused while no broker follows the names (before the restart): the process now
    /// behind the pid holds no connection to the bus, so it is not the caller.
    @Test(
        .enabled(
            if: access("/proc/sys/kernel/ns_last_pid", W_OK) == 0,
            "giving a pid to a chosen process sets the kernel's next pid, which only root may"))
    func aConnectionWhosePidIsReusedBeforeTheBrokerRestartedGainsNothing() async throws {
        try await Self.reuseThePidOfAConnection(calledFirst: false, restart: .afterTheReuse)
    }

    /// The same when the process that takes the pid before the restart is itself a client of the bus: it holds a
    /// connection, but fewer than the names that claim its pid when the new broker begins following names (its
    /// own, and the one the app left to its child), so no name claiming it is served as the host.
    @Test(
        .enabled(
            if: access("/proc/sys/kernel/ns_last_pid", W_OK) == 0,
            "giving a pid to a chosen process sets the kernel's next pid, which only root may"))
    func aConnectionWhosePidIsReusedByAClientOfTheBusBeforeTheBrokerRestartedGainsNothing() async throws {
        try await Self.reuseThePidOfAConnection(calledFirst: false, restart: .afterTheReuse, reuserConnects: true)
    }

    /// When the broker restarts in the pid-reuse tests.
    enum Restart { case never, beforeTheReuse, afterTheReuse }

    static func reuseThePidOfAConnection(calledFirst: Bool, restart: Restart, reuserConnects: Bool = false) async throws {
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus)
            try await Self.seed(bus)
            let app = try Self.sandbox(bus, info: .application("org.example.Editor"))
            let report = try await app.run([
                "op": "spawn-holder", "address": bus.address, "call": calledFirst, "name": Self.mainName,
                "key": "/org/example/Editor/font-size",
            ])
            // The pid the bus daemon knows the connection by: the process that made it and has now ended.
            let holder = try #require(report["name"] as? String, "\(report)")
            let host = try await bus.connect()
            let pidReply = try await host.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetConnectionUnixProcessID", arguments: [.string(holder)])
            await host.close()
            guard case .uint32(let busPid)? = pidReply.first else { throw SandboxFailure(description: "\(pidReply)") }
            let pid = Int(busPid)
            if restart == .beforeTheReuse {
                _ = await broker.stop()
                broker = try await TestBroker.start(on: bus)
            }
            // The clock moves on past the tick the connection appeared in, as any reuse in practice does.
            let start = Self.bootTicks()
            while Self.bootTicks() < start + 2 {}
            let reuser = try Self.processWithPid(pid, connectingTo: reuserConnects ? bus : nil)
            defer { reuser.signal(SIGKILL) }
            if reuserConnects { try await Self.waitForAConnection(of: pid, on: bus) }
            if restart == .afterTheReuse {
                _ = await broker.stop()
                broker = try await TestBroker.start(on: bus)
            }

            let other = try await app.run([
                "op": "holder-call", "name": Self.mainName, "method": "Get", "signature": "s",
                "args": "('/org/other/Mail/password-hint',)",
            ])
            #expect(Self.errorName(other) == "AccessDenied", "\(other)")
            if !calledFirst {
                let message = other["message"] as? String ?? ""
                let why =
                    restart == .afterTheReuse
                    ? (reuserConnects ? "held fewer connections to the bus" : "holds no connection to the bus") : "reused"
                #expect(message.contains(why), "\(other)")
            }
            await app.stop()
            _ = await broker.stop()
        }
    }

    /// Waits (10 s at most) until a name on the bus was made by the process `pid`.
    static func waitForAConnection(of pid: Int, on bus: TestBus) async throws {
        let connection = try await bus.connect()
        let deadline = ContinuousClock.now + .seconds(10)
        var found = false
        while !found, ContinuousClock.now < deadline {
            let listed = try? await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "ListNames", arguments: [])
            guard case .array(_, let names)? = listed?.first else { break }
            for case .string(let name) in names where name.hasPrefix(":") && !found {
                let reply = try? await connection.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "GetConnectionUnixProcessID", arguments: [.string(name)])
                if case .uint32(let owner)? = reply?.first, owner == UInt32(pid) { found = true }
            }
            await Task.yield()
        }
        await connection.close()
        guard found else {
            throw SandboxFailure(description: "no connection of process \(pid) appeared on the bus within 10 s")
        }
    }

    /// Clock ticks since boot, the unit of a process's start time in `/proc/PID/stat`.
    static func bootTicks() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        let hertz = UInt64(sysconf(Int32(_SC_CLK_TCK)))
        return UInt64(now.tv_sec) * hertz + UInt64(now.tv_nsec) * hertz / 1_000_000_000
    }

    /// A host process that gets `pid`, from the kernel's next pid (`/proc/sys/kernel/ns_last_pid`, root only);
    /// tried again and again, since another process may take the pid first (beside the whole suite on two CPUs,
    /// 20 tries were once not enough).
    /// With `bus`, the process is a client of it (`gdbus wait`, which holds its connection while it waits).
    static func processWithPid(_ pid: Int, connectingTo bus: TestBus? = nil) throws -> ChildProcess {
        for _ in 0..<500 {
            try "\(pid - 1)".write(toFile: "/proc/sys/kernel/ns_last_pid", atomically: false, encoding: .utf8)
            let child =
                try bus.map {
                    try ChildProcess.spawn(
                        "/usr/bin/gdbus", ["wait", "--session", "--timeout", "60", "org.example.NeverOwned"],
                        environment: $0.environment)
                } ?? ChildProcess.spawn("/usr/bin/sleep", ["60"], environment: [:])
            if child.pid == Int32(pid) { return child }
            child.signal(SIGKILL)
        }
        throw SandboxFailure(description: "no host process got pid \(pid)")
    }
}

/// What went wrong around a sandbox, for the test's failure.
struct SandboxFailure: Error, CustomStringConvertible {
    var description: String
}
