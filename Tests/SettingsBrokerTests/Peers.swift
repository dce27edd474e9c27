// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting

/// The real D-Bus peers the broker tests run: `dbus-send`, `gdbus`, `dbus-monitor` and the python3-dbus
/// scripts in `Tests/Peers/`, each pointed at a ``TestBus`` and at `io.github.settingsbus.Settings1`.
enum Peers {
    static let dbusSendPath = "/usr/bin/dbus-send"
    static let gdbusPath = "/usr/bin/gdbus"
    static let dbusMonitorPath = "/usr/bin/dbus-monitor"
    /// The system python, which has python3-dbus (a python found on PATH may not).
    static let pythonPath = "/usr/bin/python3"

    static let name = "io.github.settingsbus.Settings1"
    static let path = "/io/github/settingsbus/Settings1"

    /// The repository's root directory.
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The path of a script in `Tests/Peers/`.
    static func script(_ name: String) -> String {
        repository.appendingPathComponent("Tests/Peers").appendingPathComponent(name).path
    }

    /// The method name as the tools take it: a bare name is a method of the settings interface.
    static func qualified(_ method: String) -> String {
        method.contains(".") ? method : "\(name).\(method)"
    }

    /// Runs `dbus-send --print-reply` with typed arguments such as `string:/a/b` or `variant:int32:5`; the
    /// reply's values are printed one per line after a header line, as in `   variant       int16 -300`.
    static func dbusSend(_ bus: TestBus, _ method: String, _ arguments: [String]) async throws -> TestProcess.Result {
        try await TestProcess.run(
            dbusSendPath,
            ["--session", "--print-reply", "--dest=\(name)", path, qualified(method)] + arguments,
            environment: bus.environment, timeLimit: .seconds(30))
    }

    /// Runs `gdbus call` with arguments in GVariant text; the reply is printed the same way, e.g. `(<5>,)`.
    ///
    /// gdbus parses each argument against the introspected type, so a text argument (`s`) must be written as a
    /// GVariant string literal (`"'[1, '"`) to reach the broker unchanged.
    static func gdbus(_ bus: TestBus, _ method: String, _ arguments: [String]) async throws -> TestProcess.Result {
        try await TestProcess.run(
            gdbusPath,
            ["call", "--session", "--dest", name, "--object-path", path, "--method", qualified(method)] + arguments,
            environment: bus.environment, timeLimit: .seconds(30))
    }

    /// Runs `Tests/Peers/settings_call.py`: one python3-dbus call whose arguments a Python expression builds.
    static func python(
        _ bus: TestBus, _ method: String, signature: String, _ arguments: String
    ) async throws -> TestProcess.Result {
        try await TestProcess.run(
            pythonPath, [script("settings_call.py"), method, signature, arguments], environment: bus.environment,
            timeLimit: .seconds(60))
    }

    /// Starts `dbus-monitor` with match rules and waits until the bus has made it a monitor (it prints the
    /// `NameLost` of its own unique name then), so nothing sent afterwards is missed.
    static func monitor(_ bus: TestBus, rules: [String]) async throws -> RunningProcess {
        let monitor = try RunningProcess.start(dbusMonitorPath, ["--address", bus.address, "--monitor"] + rules)
        do {
            try await monitor.line(where: { $0.contains("member=NameLost") })
        } catch {
            await monitor.terminate()
            throw error
        }
        return monitor
    }

    /// A process's standard output with each run of white space made one space, and trimmed.
    static func squeezed(_ result: TestProcess.Result) -> String {
        result.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
}

/// A peer or the broker did not behave as a test expects.
struct PeerFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The error a peer reported for a call: the D-Bus error name and the message, as each tool prints them.
struct ReportedError: Equatable, CustomStringConvertible {
    var name: String
    var message: String

    var description: String { "\(name): \(message)" }

    /// Reads the error from a tool's output: `Error <name>: <message>` (dbus-send),
    /// `Error: GDBus.Error:<name>: <message>` (gdbus) or `error <name>: <message>` (settings_call.py).
    ///
    /// - Returns: nil when the output holds no error line.
    init?(_ result: TestProcess.Result) {
        for line in (result.stderr + "\n" + result.stdout).split(separator: "\n") {
            let rest: Substring
            if line.hasPrefix("Error: GDBus.Error:") {
                rest = line.dropFirst("Error: GDBus.Error:".count)
            } else if line.hasPrefix("Error ") || line.hasPrefix("error ") {
                rest = line.dropFirst("Error ".count)
            } else {
                continue
            }
            guard let colon = rest.range(of: ": ") else { continue }
            name = String(rest[..<colon.lowerBound])
            message = String(rest[colon.upperBound...])
            return
        }
        return nil
    }
}

extension DBusConnection {
    /// The process id of a name's owner, as the bus daemon knows it (`GetConnectionUnixProcessID`).
    func processID(of name: BusName) async throws -> Int32 {
        let reply = try await call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetConnectionUnixProcessID", arguments: [.string(name.rawValue)])
        guard case .uint32(let pid)? = reply.first else {
            throw PeerFailure("GetConnectionUnixProcessID answered \(reply)")
        }
        return Int32(bitPattern: pid)
    }
}

extension DBusValue {
    /// The entries of a dictionary value, or nil for any other value.
    var entries: [DBusDictEntry]? {
        guard case .dictionary(_, _, let entries) = self else { return nil }
        return entries
    }

    /// The value of a string key in an `a{sv}` dictionary, without its variant.
    subscript(name: String) -> DBusValue? {
        guard let entry = entries?.first(where: { $0.key == .string(name) }) else { return nil }
        if case .variant(let inner) = entry.value { return inner }
        return entry.value
    }

    /// An `a{sv}` dictionary from pairs, in the order given.
    static func stringMap(_ entries: [(String, DBusValue)]) -> DBusValue {
        .dictionary(
            key: .string, value: .variant,
            entries.map { DBusDictEntry(key: .string($0.0), value: .variant($0.1)) })
    }
}

/// Runs `body` with a long-running peer and ends the peer afterwards, however `body` ends.
func withPeer<T>(_ peer: RunningProcess, _ body: (RunningProcess) async throws -> T) async throws -> T {
    do {
        let result = try await body(peer)
        await peer.terminate()
        return result
    } catch {
        await peer.terminate()
        throw error
    }
}
