// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing

/// A test step that went wrong, with what happened.
struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Calls to the broker's `io.github.settingsbus.Settings1` made from the test process.
struct Broker {
    let connection: DBusConnection

    static let interface: InterfaceName = "io.github.settingsbus.Settings1"

    func call(_ member: MemberName, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await connection.call(
            destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
            interface: Self.interface, member: member, arguments: arguments, timeout: .seconds(20))
    }

    /// `Status()`, as a dictionary.
    func status() async throws -> [String: DBusValue] {
        let reply = try await call("Status")
        guard case .dictionary(.string, .variant, let entries)? = reply.first else {
            throw TestFailure("Status replied \(reply)")
        }
        var status: [String: DBusValue] = [:]
        for entry in entries {
            if case .string(let key) = entry.key, case .variant(let value) = entry.value { status[key] = value }
        }
        return status
    }

    func set(_ key: String, _ value: DBusValue) async throws -> UInt64 {
        let reply = try await call("Set", [.string(key), .variant(value)])
        guard case .uint64(let serial)? = reply.first else { throw TestFailure("Set replied \(reply)") }
        return serial
    }

    func get(_ key: String) async throws -> DBusValue {
        let reply = try await call("Get", [.string(key)])
        guard case .variant(let value)? = reply.first else { throw TestFailure("Get replied \(reply)") }
        return value
    }

    /// The `Serial` property.
    func serial() async throws -> UInt64 {
        try await connection.brokerSerial()
    }

    /// The D-Bus error name a call fails with, or nil if it succeeds.
    func error(of member: MemberName, _ arguments: [DBusValue]) async -> String? {
        do {
            _ = try await call(member, arguments)
            return nil
        } catch let error as DBusError {
            return error.name.rawValue
        } catch {
            return "\(error)"
        }
    }
}

extension DBusValue {
    /// The text of a string value, or nil.
    var text: String? {
        if case .string(let text) = self { return text }
        return nil
    }
}

/// A temporary directory for a store, removed at the end of the test.
final class StoreDirectory: Sendable {
    let url: URL

    init() throws {
        var template = Array("/tmp/settingsbus-reliability-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestFailure("cannot create a temporary directory: errno \(errno)")
        }
        url = URL(fileURLWithPath: String(cString: made))
    }

    var path: String { url.path }
    var store: String { url.appendingPathComponent("settings.db").path }
    var backup: String { store + ".backup" }

    /// The names in the directory, sorted.
    func names() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// The files moved aside as damaged (without the `-wal` and `-shm` that go with them).
    func damagedFiles() -> [String] {
        names().filter { $0.contains(".damaged-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Mounting a small tmpfs: for a full disk and a read-only file system. Needs root with mount rights
/// (CAP_SYS_ADMIN), which a container often lacks; the tests that need it say so when it is missing.
enum Mounts {
    /// Whether this process can mount a tmpfs (tried once, on a scratch directory).
    static let available: Bool = {
        guard let directory = try? StoreDirectory() else { return false }
        defer { directory.remove() }
        guard (try? mountTmpfs(directory.path, size: "64k")) != nil else { return false }
        unmount(directory.path)
        return true
    }()

    /// Mounts a tmpfs of `size` (such as `512k`) on `directory`. The C function is `mount`.
    static func mountTmpfs(_ directory: String, size: String) throws {
        guard mount("tmpfs", directory, "tmpfs", 0, "size=\(size),mode=0755") == 0 else {
            throw TestFailure("cannot mount a tmpfs on \(directory): \(String(cString: strerror(errno)))")
        }
    }

    /// Remounts a mounted tmpfs read-only.
    static func remountReadOnly(_ directory: String) throws {
        guard mount("tmpfs", directory, "tmpfs", UInt(MS_REMOUNT | MS_RDONLY), nil) == 0 else {
            throw TestFailure("cannot remount \(directory) read-only: \(String(cString: strerror(errno)))")
        }
    }

    /// Unmounts, lazily (MNT_DETACH), so that a file still open elsewhere cannot keep the mount busy.
    static func unmount(_ directory: String) {
        umount2(directory, Int32(MNT_DETACH))
    }
}

/// The repository's `Tests/Peers/` scripts.
enum PeerScripts {
    /// The system python, which has python3-dbus (a python found on PATH may not).
    static let python = "/usr/bin/python3"

    static func path(_ name: String) -> String {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Peers").appendingPathComponent(name).path
    }
}
