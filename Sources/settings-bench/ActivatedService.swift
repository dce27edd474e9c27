// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
internal import Glibc

/// A service that the private bus starts by D-Bus activation, as a session bus starts the broker and
/// dconf-service: the first call to its name starts it.
///
/// The activation file runs a small shell script that records the service's pid and then `exec`s it, so
/// the bench can end it by its pid and read its memory, although the bus daemon is its parent.
final class ActivatedService: Sendable {
    let name: BusName
    private let script: URL
    private let pidFile: URL

    /// Installs the activation file on `bus`; ``configure(command:log:)`` says what it runs.
    init(name: BusName, bus: TestBus, directory: URL) throws {
        self.name = name
        script = directory.appendingPathComponent("\(name.rawValue).sh")
        pidFile = directory.appendingPathComponent("\(name.rawValue).pid")
        try bus.installService(name: name.rawValue, command: ["/bin/sh", script.path])
    }

    /// Sets the command that the next activation runs, with its standard error going to `log`.
    func configure(command: [String], log: URL) throws {
        func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let exec = command.map(quoted).joined(separator: " ")
        try "#!/bin/sh\necho $$ > \(quoted(pidFile.path))\nexec \(exec) >>\(quoted(log.path)) 2>&1\n"
            .write(to: script, atomically: true, encoding: .utf8)
    }

    /// The pid of the running service, when it was started.
    var pid: Int32? {
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8),
            let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0,
            FileManager.default.fileExists(atPath: "/proc/\(pid)")
        else { return nil }
        return pid
    }

    /// The resident memory of the service (`VmRSS` in `/proc/<pid>/status`), in KiB.
    var residentKiB: Int? {
        guard let pid, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
            return nil
        }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return nil
    }

    /// Ends the service by its pid (SIGTERM, then SIGKILL after 20 s) and waits until the bus has seen its
    /// name released, so that the next call activates a new one.
    func stop(using connection: DBusConnection) async throws {
        if let pid {
            kill(pid, SIGTERM)
            let deadline = monotonicNanoseconds() + 20_000_000_000
            while FileManager.default.fileExists(atPath: "/proc/\(pid)") && isAlive(pid) {
                if monotonicNanoseconds() > deadline {
                    progress("\(name) did not end within 20 s of SIGTERM; sending SIGKILL to \(pid)")
                    kill(pid, SIGKILL)
                }
                try await Task.sleep(for: .milliseconds(2))
            }
            try? FileManager.default.removeItem(at: pidFile)
        }
        for _ in 0..<5000 {
            let reply = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "NameHasOwner", arguments: [.string(name.rawValue)])
            if reply.first == .boolean(false) { return }
            try await Task.sleep(for: .milliseconds(2))
        }
        throw BenchFailure("\(name) still has an owner after its process ended")
    }

    /// Whether a process exists and is not a zombie waiting for the bus daemon to reap it.
    private func isAlive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        let state = stat[stat.index(close, offsetBy: 2)...].first
        return state != "Z" && state != "X"
    }
}
