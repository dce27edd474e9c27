// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
internal import Glibc
import SettingsBusTesting
import Testing

/// A service that a test bus starts by D-Bus activation, through a small shell wrapper that records the
/// service's pid before it `exec`s it, so that the test can end it although the bus daemon is its parent.
struct ActivatedService {
    /// The bus name the service takes.
    let name: String
    /// The file the wrapper writes the pid to.
    let pidFile: URL

    /// Writes the wrapper and the activation file for `name` on `bus`.
    ///
    /// - Parameters:
    ///   - command: the service's program and arguments.
    ///   - directory: where the wrapper, the pid file and the service's log go.
    static func install(name: String, command: [String], on bus: TestBus, in directory: URL) throws -> ActivatedService
    {
        func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let script = directory.appendingPathComponent("\(name).sh")
        let pidFile = directory.appendingPathComponent("\(name).pid")
        let log = directory.appendingPathComponent("\(name).log")
        let exec = command.map(quoted).joined(separator: " ")
        try "#!/bin/sh\necho $$ > \(quoted(pidFile.path))\nexec \(exec) 2>>\(quoted(log.path))\n"
            .write(to: script, atomically: true, encoding: .utf8)
        try bus.installService(name: name, command: ["/bin/sh", script.path])
        return ActivatedService(name: name, pidFile: pidFile)
    }

    /// Ends the service with SIGTERM, if it was started, and waits until the bus has seen its name released.
    func stop(on bus: TestBus) async throws {
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8),
            let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else { return }
        try await Self.terminate(pid: pid, owning: name, on: bus)
    }

    /// Sends SIGTERM to `pid`, which owns `name` on `bus`, and waits until the name has no owner.
    static func terminate(pid: Int32, owning name: String, on bus: TestBus) async throws {
        let connection = try await bus.connect()
        // Given: a subscription to the name's owner changes, in place before the signal is sent.
        var rule = MatchRule(
            sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
        rule.arguments[0] = name
        let changes = Collector(try await connection.signals(matching: rule))
        let owned = try await connection.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NameHasOwner", arguments: [.string(name)])
        if owned.first == .boolean(true) {
            // When: the service is asked to end.
            kill(pid, SIGTERM)
            // Then: its name is released.
            _ = try await changes.next(where: { $0.body.count == 3 && $0.body[2] == .string("") })
        }
        changes.stop()
        await connection.close()
    }
}
