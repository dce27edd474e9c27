// SPDX-License-Identifier: Apache-2.0

import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// What every executable of the package agrees on: `--version` prints the one version, and a usage error
/// exits 2 with the usage on standard error.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct CommandLineTests {
    static let executables = ["settingsctl", "settings-broker", "settings-bench"]

    @Test(arguments: executables)
    func versionPrintsThePackagesVersion(_ name: String) async throws {
        let result = try await TestProcess.run(try BuiltProduct.path(name), ["--version"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == SettingsBusNames.packageVersion + "\n")
    }

    @Test(arguments: executables)
    func anUnknownOptionIsAUsageErrorWithStatus2(_ name: String) async throws {
        let result = try await TestProcess.run(try BuiltProduct.path(name), ["--no-such-option"])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("--no-such-option"), "\(result.stderr)")
        #expect(result.stderr.contains("Usage: \(name)"), "\(result.stderr)")
        #expect(result.stdout.isEmpty, "\(result.stdout)")
    }

    @Test func settingsctlWithoutAVerbPrintsItsUsageAndExits2() async throws {
        let result = try await TestProcess.run(try Ctl.path(), [])
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("no verb given"), "\(result.stderr)")
        #expect(result.stderr.contains("Usage: settingsctl <subcommand>"), "\(result.stderr)")
        #expect(result.stdout.isEmpty, "\(result.stdout)")
    }
}
