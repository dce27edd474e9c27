// SPDX-License-Identifier: Apache-2.0

public import DBus
public import Foundation
internal import Glibc

/// A service that a test bus starts by D-Bus activation, as a session bus starts the broker or dconf-service:
/// the first call to its name starts it.
///
/// The activation file runs a small shell wrapper that records the service's pid and then `exec`s it, so a test
/// or the benchmark can end it by its pid and read its memory, although the bus daemon is its parent.
///
/// ```swift
/// let service = try ActivatedService.install(name: "ca.desrt.dconf", command: [dconfService], on: bus, in: home)
/// // … the first call to ca.desrt.dconf starts it …
/// try await service.stop(on: bus)
/// ```
public final class ActivatedService: Sendable {
    /// The bus name the service takes.
    public let name: BusName
    private let script: URL
    private let pidFile: URL

    /// Installs the activation file for `name` on `bus`; ``configure(command:log:)`` says what it runs.
    ///
    /// - Parameter directory: where the wrapper and the pid file go.
    public init(name: BusName, bus: TestBus, directory: URL) throws {
        self.name = name
        script = directory.appendingPathComponent("\(name.rawValue).sh")
        pidFile = directory.appendingPathComponent("\(name.rawValue).pid")
        try bus.installService(name: name.rawValue, command: ["/bin/sh", script.path])
    }

    /// Installs the activation file and a wrapper that runs `command`, its standard error going to
    /// `<directory>/<name>.log`.
    public static func install(
        name: BusName, command: [String], on bus: TestBus, in directory: URL
    ) throws -> ActivatedService {
        let service = try ActivatedService(name: name, bus: bus, directory: directory)
        try service.configure(command: command, log: directory.appendingPathComponent("\(name.rawValue).log"))
        return service
    }

    /// Sets the command that the next activation runs, with its standard output and error going to `log`.
    public func configure(command: [String], log: URL) throws {
        func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let exec = command.map(quoted).joined(separator: " ")
        try "#!/bin/sh\necho $$ > \(quoted(pidFile.path))\nexec \(exec) >>\(quoted(log.path)) 2>&1\n"
            .write(to: script, atomically: true, encoding: .utf8)
    }

    /// The pid of the running service, when it was started and is still there.
    public var pid: Int32? {
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8),
            let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)), pid > 0,
            FileManager.default.fileExists(atPath: "/proc/\(pid)")
        else { return nil }
        return pid
    }

    /// The resident memory of the service (`VmRSS` in `/proc/<pid>/status`), in KiB.
    public var residentKiB: Int? {
        guard let pid, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
            return nil
        }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return nil
    }

    /// Ends the service, if it runs, and waits until the bus has seen its name released, so that the next
    /// call activates a new one (see ``terminate(pid:owning:using:)``).
    public func stop(on bus: TestBus) async throws {
        let connection = try await bus.connect()
        do {
            try await stop(using: connection)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    /// ``stop(on:)`` through a connection the caller has open.
    public func stop(using connection: DBusConnection) async throws {
        guard let pid else { return }
        try await Self.terminate(pid: pid, owning: name, using: connection)
        try? FileManager.default.removeItem(at: pidFile)
    }

    /// Sends SIGTERM to `pid`, which owns `name` on `bus`, and waits until the name has no owner.
    public static func terminate(pid: Int32, owning name: BusName, on bus: TestBus) async throws {
        let connection = try await bus.connect()
        do {
            try await terminate(pid: pid, owning: name, using: connection)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    /// Sends SIGTERM to `pid`, which owns `name`, and waits until the bus says the name has no owner; a
    /// process that keeps it 20 s later gets SIGKILL.
    ///
    /// - Throws: ``TestProcess/Failure`` when the name still has an owner 20 s after SIGKILL.
    public static func terminate(pid: Int32, owning name: BusName, using connection: DBusConnection) async throws {
        // Given: a subscription to the name's owner changes, in place before the signal is sent.
        var rule = MatchRule(
            sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
        rule.arguments[0] = name.rawValue
        let changes = Collector(try await connection.signals(matching: rule))
        defer { changes.stop() }
        guard try await connection.nameOwner(of: name) != nil else { return }
        func released(_ signal: DBusMessage) -> Bool { signal.body.count == 3 && signal.body[2] == .string("") }
        // When: the service is asked to end. Then: its name is released.
        kill(pid, SIGTERM)
        if (try? await changes.next(where: released, timeLimit: .seconds(20))) != nil { return }
        kill(pid, SIGKILL)
        do {
            _ = try await changes.next(where: released, timeLimit: .seconds(20))
        } catch {
            throw TestProcess.Failure(description: "\(name) still has an owner 20 s after SIGKILL to \(pid)")
        }
    }
}
