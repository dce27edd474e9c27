// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `scripts/install` and `scripts/uninstall` under a temporary prefix, and D-Bus activation through the
/// installed activation file: the README's two install commands, run as written (the install with a
/// `--prefix` added).
///
/// The install reuses the debug build (`SETTINGSBUS_SKIP_BUILD=1`, `SETTINGSBUS_BIN_DIR`); `HOME` and
/// `XDG_RUNTIME_DIR` point into the temporary folder so that nothing reaches the user's systemd or files.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct InstallTests {
    static let installedFiles = [
        "bin/settings-broker", "bin/settingsctl", "share/dbus-1/services/io.github.settingsbus.Settings1.service",
        "share/systemd/user/settings-broker.service", "share/doc/settingsbus/README.md",
        "share/man/man1/settingsctl.1", "share/man/man1/settings-broker.1", "share/man/man7/settingsbus.7",
        "share/man/man1/settings-sync.1", "lib/gio/modules/libsettingsbus-gio.so",
        "share/dbus-1/services/io.github.settingsbus.SandboxedSettings1.service",
        "share/dbus-1/services/org.freedesktop.impl.portal.desktop.settingsbus.service",
        "share/xdg-desktop-portal/portals/settingsbus.portal",
        "bin/settings-editor",
        "share/bash-completion/completions/settingsctl", "share/zsh/site-functions/_settingsctl",
        "share/fish/vendor_completions.d/settingsctl.fish",
    ]

    @Test func installedActivationFileStartsTheBrokerAndUninstallRemovesExactlyWhatWasInstalled() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("settingsctl-install-\(UUID())")
        let prefix = root.appendingPathComponent("prefix")
        let config = root.appendingPathComponent("config")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let isolation = ["HOME": root.path, "XDG_RUNTIME_DIR": root.path, "XDG_CONFIG_HOME": config.path]
        let readme = try DocumentationBlocks.block(in: "README.md", under: "Install").commands
        try #require(readme.count == 2 && readme[0] == "scripts/install", "\(readme)")
        let check = readme[1].split(separator: " ").map(String.init)
        try #require(check.first == "settingsctl", "\(readme)")
        let builtFolder = URL(fileURLWithPath: try Ctl.path()).deletingLastPathComponent().path
        // scripts/install would build it otherwise, and a build cannot run while the tests hold the build folder.
        try #require(
            FileManager.default.isExecutableFile(atPath: builtFolder + "/generate-manual"),
            "build it first: swift build --product generate-manual (scripts/test does)")

        // The bus daemon gets the same isolation, which the broker it activates inherits.
        try await withTestBus(environment: isolation) { bus in
            let environment = bus.environment.merging(isolation) { _, new in new }
            // Given: an install under the prefix.
            let install = try await TestProcess.run(
                Ctl.repository.appendingPathComponent(readme[0]).path, ["--prefix", prefix.path],
                environment: environment.merging(["SETTINGSBUS_SKIP_BUILD": "1", "SETTINGSBUS_BIN_DIR": builtFolder]) {
                    _, new in new
                })
            #expect(install.status == 0, "\(install.stdout)\(install.stderr)")
            for file in Self.installedFiles {
                #expect(FileManager.default.fileExists(atPath: prefix.appendingPathComponent(file).path), "\(file)")
            }
            let activation = prefix.appendingPathComponent(Self.installedFiles[2])
            let unit = try String(contentsOf: prefix.appendingPathComponent(Self.installedFiles[3]), encoding: .utf8)
            let activationText = try String(contentsOf: activation, encoding: .utf8)
            let broker = prefix.appendingPathComponent("bin/settings-broker").path
            #expect(activationText.contains("\nExec=\(broker) --bus session\n"), "\(activationText)")
            #expect(activationText.contains("\nSystemdService=settings-broker.service\n"), "\(activationText)")
            #expect(!activationText.contains("@"), "\(activationText)")
            // The sandboxed apps' name and the portal's backend are activated by the same broker.
            for name in ["io.github.settingsbus.SandboxedSettings1", "org.freedesktop.impl.portal.desktop.settingsbus"] {
                let text = try String(
                    contentsOf: prefix.appendingPathComponent("share/dbus-1/services/\(name).service"), encoding: .utf8)
                #expect(text.contains("\nName=\(name)\nExec=\(broker) --bus session\n"), "\(text)")
            }
            #expect(unit.contains("\nExecStart=\(broker) --bus session\n"), "\(unit)")
            #expect(
                unit.contains("\nDocumentation=file://\(prefix.path)/share/doc/settingsbus/README.md\n"), "\(unit)")
            // The manual pages of settingsctl and the broker, and the administrators' page, are those of docs/man;
            // settings-sync's is its argument parser's; the completions ask settingsctl for key paths.
            for (installed, source) in [
                ("man1/settingsctl.1", "settingsctl.1"), ("man1/settings-broker.1", "settings-broker.1"),
                ("man7/settingsbus.7", "settingsbus.7"),
            ] {
                let page = try Data(contentsOf: prefix.appendingPathComponent("share/man/\(installed)"))
                #expect(
                    page == (try Data(contentsOf: Ctl.repository.appendingPathComponent("docs/man/\(source)"))),
                    "\(installed)")
            }
            let syncManual = try String(
                contentsOf: prefix.appendingPathComponent("share/man/man1/settings-sync.1"), encoding: .utf8)
            #expect(syncManual.contains(".Sh NAME") && syncManual.contains("channel-fd"), "\(syncManual.prefix(400))")
            for file in Self.installedFiles.suffix(3) {
                let script = try String(contentsOf: prefix.appendingPathComponent(file), encoding: .utf8)
                #expect(script.contains("---completion"), "\(file)")
            }
            // No placeholder is left (the unit's system call filter names sets such as @system-service).
            #expect(!unit.contains("@bindir@") && !unit.contains("@docdir@"), "\(unit)")

            // When: the bus's service folder holds the installed activation file and the installed settingsctl
            // makes the first call.
            try FileManager.default.createSymbolicLink(
                at: bus.serviceDirectory.appendingPathComponent("io.github.settingsbus.Settings1.service"),
                withDestinationURL: activation)
            let settingsctl = prefix.appendingPathComponent("bin/\(check[0])").path
            let status = try await TestProcess.run(settingsctl, Array(check.dropFirst()), environment: environment)

            // Then: the bus started the installed broker, which answered.
            #expect(status.status == 0, "\(status.stderr)")
            #expect(
                status.stdout.split(separator: "\n").contains { $0.hasPrefix("health:") && $0.hasSuffix(" ok") },
                "\(status.stdout)")
            let first = try await TestProcess.run(
                settingsctl, ["get", "/test/install/theme"], environment: environment)
            #expect(first.status == 3, "\(first.stderr)")
            #expect(first.stderr.contains("/test/install/theme has no value"), "\(first.stderr)")
            let set = try await TestProcess.run(
                settingsctl, ["set", "/test/install/theme", "'dark'"], environment: environment)
            #expect(set.status == 0, "\(set.stderr)")
            let pidLine = status.stdout.split(separator: "\n").first { $0.hasPrefix("pid:") }
            let pid = try #require(pidLine.flatMap { Int32($0.dropFirst(4).trimmingCharacters(in: .whitespaces)) })
            #expect(
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) == broker,
                "the broker that answered is not the installed one")
            // Its store is in the isolated XDG_CONFIG_HOME.
            #expect(
                FileManager.default.fileExists(atPath: config.appendingPathComponent("settingsbus/settings.db").path))
            try await ActivatedService.terminate(pid: pid, owning: "io.github.settingsbus.Settings1", on: bus)

            // When: another program lives in the prefix, and SettingsBus is uninstalled.
            let other = prefix.appendingPathComponent("bin/other-program")
            try "#!/bin/sh\n".write(to: other, atomically: true, encoding: .utf8)
            let uninstall = try await TestProcess.run(
                Ctl.repository.appendingPathComponent("scripts/uninstall").path, ["--prefix", prefix.path],
                environment: environment)
            #expect(uninstall.status == 0, "\(uninstall.stderr)")

            // Then: every installed file is gone, and nothing else.
            for file in Self.installedFiles {
                #expect(!FileManager.default.fileExists(atPath: prefix.appendingPathComponent(file).path), "\(file)")
            }
            #expect(FileManager.default.fileExists(atPath: other.path))
            #expect(
                !FileManager.default.fileExists(atPath: prefix.appendingPathComponent("share/doc/settingsbus").path))
            #expect(
                FileManager.default.fileExists(atPath: config.appendingPathComponent("settingsbus/settings.db").path),
                "uninstall keeps the settings")
        }
    }

    @Test func installRefusesUnknownArguments() async throws {
        let result = try await TestProcess.run(
            Ctl.repository.appendingPathComponent("scripts/install").path, ["--frobnicate"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("usage: scripts/install [--prefix DIR]"), "\(result.stderr)")
    }
}
