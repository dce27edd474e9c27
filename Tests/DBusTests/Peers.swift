// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting

/// The real D-Bus peers the tests run: command-line tools and the python3-dbus scripts in `Tests/Peers/`.
enum Peers {
    static let gdbus = "/usr/bin/gdbus"
    static let dbusSend = "/usr/bin/dbus-send"
    static let dbusMonitor = "/usr/bin/dbus-monitor"
    /// The system python, which has python3-dbus (a python found on PATH may not).
    static let python = "/usr/bin/python3"

    /// The path of a script in `Tests/Peers/`.
    static func script(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers").appendingPathComponent(name).path
    }

    /// Runs `gdbus call` against an object; the reply is printed as GVariant text, e.g. `('ab',)`.
    static func gdbusCall(
        _ bus: TestBus, destination: String, path: String, method: String, _ arguments: [String] = []
    ) async throws -> TestProcess.Result {
        try await TestProcess.run(
            gdbus,
            ["call", "--address", bus.address, "--dest", destination, "--object-path", path, "--method", method]
                + arguments,
            timeLimit: .seconds(30))
    }

    /// Runs `dbus-send --print-reply` against an object.
    static func dbusSend(
        _ bus: TestBus, destination: String, path: String, method: String, _ arguments: [String] = []
    ) async throws -> TestProcess.Result {
        try await TestProcess.run(
            dbusSend, ["--bus=\(bus.address)", "--print-reply", "--dest=\(destination)", path, method] + arguments,
            timeLimit: .seconds(30))
    }

    /// Starts `dbus-monitor` with match rules and waits until it is monitoring (it prints the `NameLost` of its
    /// own unique name once the bus has made it a monitor).
    static func monitor(_ bus: TestBus, rules: [String]) async throws -> RunningProcess {
        let monitor = try RunningProcess.start(dbusMonitor, ["--address", bus.address, "--monitor"] + rules)
        try await monitor.line(where: { $0.contains("member=NameLost") })
        return monitor
    }
}

/// A peer that did not behave as a test expects.
struct PeerFailure: Error, CustomStringConvertible {
    var description: String
}

/// Closes `connection` after `limit`, ending its streams, so a test waiting on a stream fails instead of
/// hanging when the awaited signal never comes. Cancel the returned task once the wait is over.
func closing(_ connection: DBusConnection, after limit: Duration = .seconds(30)) -> Task<Void, Never> {
    Task {
        do { try await Task.sleep(for: limit) } catch { return }
        await connection.close()
    }
}
