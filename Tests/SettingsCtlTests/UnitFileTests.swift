// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing

/// The systemd tool the tests run.
private let systemdAnalyze = "/usr/bin/systemd-analyze"

/// The systemd --user unit that `scripts/install` installs: systemd reads it without a complaint, and its
/// sandboxing keeps `systemd-analyze security`'s exposure level low.
@Suite(
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
    static func withInstalledUnit(_ body: (String, [String: String]) async throws -> Void) async throws {
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
        let install = try await TestProcess.run(
            Ctl.repository.appendingPathComponent("scripts/install").path, ["--prefix", prefix],
            environment: environment.merging(["SETTINGSBUS_SKIP_BUILD": "1", "SETTINGSBUS_BIN_DIR": builtFolder]) {
                _, new in new
            })
        try #require(install.status == 0, "\(install.stdout)\(install.stderr)")
        try await body(prefix + "/share/systemd/user/settings-broker.service", environment)
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
}
