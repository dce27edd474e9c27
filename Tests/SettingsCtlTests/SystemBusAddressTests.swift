// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// A broker given a system-type bus by its address (`--bus ADDRESS`), under the shipped system policy and the
/// system bus's default of no names owned, which lets root own the main name only: the names it may not own (the sandboxed apps' name, the desktop portal's) are
/// logged and left out, and the broker serves.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct SystemBusAddressTests {
    @Test func aBrokerOnASystemTypeBusGivenByAddressServesWithoutTheNamesItMayNotOwn() async throws {
        // A bus whose default policy is the system bus's (no one owns a name it is not given) with the shipped
        // policy file.
        let policy = Ctl.repository.appendingPathComponent("dbus/io.github.settingsbus.Settings1.conf").path
        let bus = try await TestBus.start(
            extraConfig: """
                <policy context="default"><allow user="*"/><deny own="*"/></policy>
                <include>\(policy)</include>
                """)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-address-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let watcher = try await bus.connect()
        let owners = Collector(try await watcher.nameOwnerChanges(of: TestBroker.busName))

        // When: the broker is given the bus by its address, as a session broker would be (its log read as it
        // is written).
        let broker = try RunningProcess.start(
            "/bin/sh",
            [
                "-c", "exec \"$0\" --bus \"$1\" --store \"$2\" 2>&1", try TestBroker.executablePath(), bus.address,
                folder.appendingPathComponent("settings.db").path,
            ],
            environment: bus.environment)

        // Then: the names the policy refuses it are logged and left out, once it has started everything else.
        _ = try await owners.next(timeLimit: .seconds(60))
        for name in ["io.github.settingsbus.SandboxedSettings1", "org.freedesktop.impl.portal.desktop.settingsbus"] {
            let (line, _) = try await broker.line(where: { $0.contains(name) }, timeLimit: .seconds(60))
            #expect(line.contains("\(name) cannot be owned on this bus"), "\(line)")
        }
        // And: it serves a write and a read, and stops cleanly.
        _ = try await Ctl.output(bus, ["--bus", bus.address, "set", "/org/example/site/motd", "'hello'"])
        #expect(try await Ctl.output(bus, ["--bus", bus.address, "get", "/org/example/site/motd"]) == "'hello'\n")
        #expect(await broker.terminate() == 0)
        await watcher.close()
        await bus.stop()
    }
}
