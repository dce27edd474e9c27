// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The machine-wide broker as the system unit starts it: `settings-broker --bus system`, no `--store`, on a
/// private bus configured like the system bus (the shipped policy), with an unprivileged peer.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct SystemBrokerTests {
    @Test func theMachineWideBrokerKeepsItsStoreInTheStateFolderAndOnlyRootWrites() async throws {
        let bus = try await TestBus.startLikeTheSystemBus()
        let state = try TemporaryFolder()
        defer { state.remove() }
        let admin = try TemporaryFolder()
        defer { admin.remove() }
        let watcher = try await bus.connect()
        let owners = Collector(try await watcher.nameOwnerChanges(of: TestBroker.busName))

        // When: the broker starts as the system unit starts it, with $STATE_DIRECTORY set as StateDirectory= does.
        let broker = try RunningProcess.start(
            try TestBroker.executablePath(), ["--bus", "system", "--admin-dir", admin.path],
            environment: bus.environment.merging(["STATE_DIRECTORY": state.path]) { _, new in new })
        _ = try await owners.next()

        // Then: root writes, and its store is settings.db in that folder, readable by no one else.
        _ = try await Ctl.output(bus, ["--bus", "system", "set", "/org/example/site/motd", "'hello'"])
        let status = try await Ctl.output(bus, ["--bus", "system", "status"])
        let store = state.path + "/settings.db"
        #expect(status.contains(store), "\(status)")
        let attributes = try FileManager.default.attributesOfItem(atPath: store)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)

        // And: an unprivileged user reads through the broker but may not write.
        func asNobody(_ arguments: [String]) async throws -> TestProcess.Result {
            try await TestProcess.run(
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", try Ctl.path(), "--bus", "system"] + arguments,
                environment: bus.environment)
        }
        let read = try await asNobody(["get", "/org/example/site/motd"])
        #expect(read.status == 0, "\(read.stderr)")
        #expect(read.stdout == "'hello'\n")
        let write = try await asNobody(["set", "/org/example/site/motd", "'mine'"])
        #expect(write.status == 7, "\(write.stderr)")
        #expect(try await Ctl.output(bus, ["--bus", "system", "get", "/org/example/site/motd"]) == "'hello'\n")

        #expect(await broker.terminate() == 0)
        await watcher.close()
        await bus.stop()
    }
}

/// A temporary folder, removed with ``remove()``.
private struct TemporaryFolder {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-system-\(UUID())").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
