// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The systemd tool the tests run.
private let systemdAnalyze = "/usr/bin/systemd-analyze"

/// The systemd --user unit that `scripts/install` installs: systemd reads it without a complaint, and its
/// sandboxing keeps `systemd-analyze security`'s exposure level low.
@Suite(
    .sharingTheMachine,
    .timeLimit(.minutes(2)),
    .enabled(
        if: FileManager.default.isExecutableFile(atPath: systemdAnalyze),
        "systemd-analyze is missing: apt-get install -y systemd"))
struct UnitFileTests {
    static let analyze = systemdAnalyze
    /// The highest overall exposure level accepted (systemd calls up to 4.9 "OK"; an unsandboxed unit is 9.6).
    static let highestExposure = 2.5

    /// Installs under a temporary prefix (the debug build), runs `body` with the installed unit's path and an
    /// environment that keeps systemd-analyze away from the user's own units, and removes everything.
    static func withInstalledUnit(
        system: Bool = false, _ body: (String, [String: String]) async throws -> Void
    ) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-unit-\(UUID())")
        let runtime = root.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let environment = [
            "HOME": root.path, "XDG_CONFIG_HOME": root.appendingPathComponent("config").path,
            "XDG_RUNTIME_DIR": runtime.path,
        ]
        let prefix = root.appendingPathComponent("prefix").path
        let builtFolder = URL(fileURLWithPath: try Ctl.path()).deletingLastPathComponent().path
        let sysconfdir = root.appendingPathComponent("etc").path
        let install = try await TestProcess.run(
            Ctl.repository.appendingPathComponent("scripts/install").path,
            (system ? ["--system", "--sysconfdir", sysconfdir] : []) + ["--prefix", prefix],
            environment: environment.merging(["SETTINGSBUS_SKIP_BUILD": "1", "SETTINGSBUS_BIN_DIR": builtFolder]) {
                _, new in new
            })
        try #require(install.status == 0, "\(install.stdout)\(install.stderr)")
        if system {
            for file in [
                "/share/dbus-1/system-services/io.github.settingsbus.Settings1.service", "/bin/settings-broker",
                "/bin/settingsctl",
            ] {
                #expect(FileManager.default.fileExists(atPath: prefix + file), "\(file)")
            }
            for file in ["/dbus-1/system.d/io.github.settingsbus.Settings1.conf", "/settingsbus/defaults.d", "/settingsbus/locks.d"] {
                #expect(FileManager.default.fileExists(atPath: sysconfdir + file), "\(file)")
            }
            let activation = try String(
                contentsOfFile: prefix + "/share/dbus-1/system-services/io.github.settingsbus.Settings1.service",
                encoding: .utf8)
            #expect(activation.contains("\nExec=\(prefix)/bin/settings-broker --bus system\n"), "\(activation)")
            #expect(activation.contains("\nUser=root\n"), "\(activation)")
            try await body(prefix + "/lib/systemd/system/settings-broker.service", environment)
            let uninstall = try await TestProcess.run(
                Ctl.repository.appendingPathComponent("scripts/uninstall").path,
                ["--system", "--sysconfdir", sysconfdir, "--prefix", prefix], environment: environment)
            #expect(uninstall.status == 0, "\(uninstall.stderr)")
            #expect(!FileManager.default.fileExists(atPath: sysconfdir + "/dbus-1/system.d/io.github.settingsbus.Settings1.conf"))
            #expect(!FileManager.default.fileExists(atPath: sysconfdir + "/settingsbus"))
        } else {
            try await body(prefix + "/share/systemd/user/settings-broker.service", environment)
        }
    }

    @Test func systemdVerifiesTheInstalledUnitWithoutAWord() async throws {
        try await Self.withInstalledUnit { unit, environment in
            let verify = try await TestProcess.run(Self.analyze, ["verify", "--user", unit], environment: environment)
            #expect(verify.status == 0, "\(verify.stderr)")
            #expect(verify.stderr.isEmpty, "\(verify.stderr)")
            // The store's folder is the one the unit keeps writable.
            let text = try String(contentsOfFile: unit, encoding: .utf8)
            #expect(text.contains("\nConfigurationDirectory=settingsbus\n"), "\(text)")
        }
    }

    @Test func theInstalledUnitsExposureLevelIsLow() async throws {
        try await Self.withInstalledUnit { unit, environment in
            let security = try await TestProcess.run(
                Self.analyze, ["security", "--user", "--offline=yes", unit], environment: environment)
            #expect(security.status == 0, "\(security.stderr)")
            // → Overall exposure level for settings-broker.service: 1.5 OK 🙂
            let line = try #require(
                security.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") },
                "\(security.stdout)\(security.stderr)")
            let figure = line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) }
            let exposure = try #require(figure, "\(line)")
            #expect(exposure <= Self.highestExposure, "\(security.stdout)")
        }
    }

    /// The sync process's units: systemd reads them without a complaint; the service reaches the network,
    /// which the broker's unit does not, and is otherwise as sandboxed, the store's folder hidden from it.
    @Test func theSyncProcessUnitsVerifyAndOnlyTheyHaveTheNetwork() async throws {
        try await Self.withInstalledUnit { unit, environment in
            let folder = URL(fileURLWithPath: unit).deletingLastPathComponent()
            let service = folder.appendingPathComponent("settings-sync.service").path
            let socket = folder.appendingPathComponent("settings-sync.socket").path
            let verify = try await TestProcess.run(Self.analyze, ["verify", "--user", socket, service], environment: environment)
            #expect(verify.status == 0, "\(verify.stderr)")
            #expect(verify.stderr.isEmpty, "\(verify.stderr)")
            let text = try String(contentsOfFile: service, encoding: .utf8)
            #expect(text.contains("\nRestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n"), "\(text)")
            #expect(text.contains("\nInaccessiblePaths=-%E/settingsbus\n"), "\(text)")
            let broker = try String(contentsOfFile: unit, encoding: .utf8)
            #expect(broker.contains("\nRestrictAddressFamilies=AF_UNIX\n"), "\(broker)")
            let security = try await TestProcess.run(
                Self.analyze, ["security", "--user", "--offline=yes", service], environment: environment)
            let line = try #require(
                security.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") },
                "\(security.stdout)\(security.stderr)")
            let exposure = try #require(line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) })
            // The network is worth about one point of exposure; everything else is closed as for the broker.
            #expect(exposure <= Self.highestExposure + 1, "\(security.stdout)")
        }
    }

    /// `scripts/install --system`: the machine-wide broker's activation file, policy, administrator folders and
    /// system unit, which systemd verifies and rates as sandboxed as the user unit.
    @Test func theMachineWideBrokerInstallsWithASandboxedSystemUnit() async throws {
        try await Self.withInstalledUnit(system: true) { unit, environment in
            let verify = try await TestProcess.run(Self.analyze, ["verify", unit], environment: environment)
            #expect(verify.status == 0, "\(verify.stderr)")
            let text = try String(contentsOfFile: unit, encoding: .utf8)
            #expect(text.contains("\nStateDirectory=settingsbus\n"), "\(text)")
            #expect(text.contains("--bus system\n"), "\(text)")
            let security = try await TestProcess.run(
                Self.analyze, ["security", "--offline=yes", unit], environment: environment)
            #expect(security.status == 0, "\(security.stderr)")
            let line = try #require(
                security.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") },
                "\(security.stdout)\(security.stderr)")
            let exposure = try #require(line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) })
            #expect(exposure <= Self.highestExposure, "\(security.stdout)")
        }
    }
}
