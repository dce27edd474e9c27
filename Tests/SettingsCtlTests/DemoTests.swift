// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `scripts/demo`, the first command of the README's quick start, works on a bus of its own and never on the one
/// that `DBUS_SESSION_BUS_ADDRESS` names, where the user's own broker and settings are. (Its second command,
/// `scripts/test`, is the command that runs this test: CI runs it, .ci/run.)
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct DemoTests {
    @Test func theDemoRunsOnItsOwnBusAndWritesNothingToTheSessionBusBroker() async throws {
        try await withTestBus { bus in
            // Given: a "session bus" whose broker stands for the user's own settings.
            let broker = try await TestBroker.start(on: bus)
            let builtFolder = URL(fileURLWithPath: try Ctl.path()).deletingLastPathComponent().path
            let quickStart = try DocumentationBlocks.block(in: "README.md", under: "Quick start").commands
            #expect(quickStart == ["scripts/demo", "scripts/test"])
            #expect(FileManager.default.isExecutableFile(
                atPath: Ctl.repository.appendingPathComponent("scripts/test").path))

            // When: the demo runs with that bus as its session bus.
            let demo = try await TestProcess.run(
                Ctl.repository.appendingPathComponent(try #require(quickStart.first)).path, [],
                environment: bus.environment.merging([
                    "SETTINGSBUS_SKIP_BUILD": "1", "SETTINGSBUS_BIN_DIR": builtFolder,
                ]) { _, new in new },
                timeLimit: .seconds(150))

            // Then: it shows what the README says (a value set by one process arriving in another), on a broker of
            // its own.
            #expect(demo.status == 0, "\(demo.stdout)\(demo.stderr)")
            #expect(demo.stdout.contains("[process B] theme: high-contrast"), "\(demo.stdout)")
            #expect(demo.stdout.contains("(<int64 100>,)"), "\(demo.stdout)")
            #expect(demo.stdout.contains("==> Done"), "\(demo.stdout)")
            // And: the session bus's broker was never written to.
            #expect(try await Ctl.output(bus, ["tree", "/"]) == "")
            let status = try await Ctl.output(bus, ["status"])
            let serial = status.split(separator: "\n").first { $0.hasPrefix("serial:") }
            #expect(serial?.split(separator: " ").last == "0", "\(status)")
            #expect(await broker.stop() == 0)
        }
    }
}
