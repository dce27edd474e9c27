// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel

extension Bench {
    /// The sandboxed app the measurement plays, and its own key.
    static let sandboxAppID = "org.example.Bench"
    static let sandboxKey = "/org/example/Bench/identify"

    /// What identifying a caller costs (decision 0033): a process of this run (`--role identify`) makes new
    /// connections and times the first `Get` of each, which waits for the caller's credentials and the broker's
    /// proof, against the first `Peer.Ping` of another new connection (which identifies nobody), then a `Get`
    /// and a `Ping` of the known caller; once on the host and once in a bubblewrap sandbox with a
    /// `/.flatpak-info`, as Flatpak makes one.
    func measureSandbox() async throws {
        let count = max(plan.roundTrips / 10, 10)
        try await settings.set(SettingKey(try SettingPath(Self.sandboxKey), default: ""), to: "a value")
        var run = SandboxRun()
        progress("identification: \(count) new connections from the host, each a first Get and a first Ping")
        run.host = try await identificationSamples(sandboxed: false, count: count)
        if FileManager.default.isExecutableFile(atPath: Self.bubblewrap) {
            progress("identification: \(count) new connections from a bubblewrap sandbox (\(Self.sandboxAppID))")
            run.sandboxed = try await identificationSamples(sandboxed: true, count: count)
        } else {
            run.sandboxedMissing = "\(Self.bubblewrap) is not installed (Debian's bubblewrap)"
            progress("sandboxed calls are not measured: \(run.sandboxedMissing!)")
        }
        results.sandbox = run
    }

    static let bubblewrap = "/usr/bin/bwrap"

    private func identificationSamples(sandboxed: Bool, count: Int) async throws -> IdentificationSamples {
        let arguments = ["--role", "identify", "--bus", bus.address, "--key", Self.sandboxKey, "--id", "\(count)"]
        let process: RunningProcess
        if sandboxed {
            let info = root.appendingPathComponent("flatpak-info")
            try "[Application]\nname=\(Self.sandboxAppID)\n".write(to: info, atomically: true, encoding: .utf8)
            var wrap = [
                "--unshare-pid", "--die-with-parent", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
                "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc", "--symlink", "usr/lib", "/lib",
                "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
                "--bind", bus.directory.path, bus.directory.path,
                "--ro-bind", URL(fileURLWithPath: benchExecutable).deletingLastPathComponent().path,
                URL(fileURLWithPath: benchExecutable).deletingLastPathComponent().path,
                "--ro-bind", info.path, "/.flatpak-info",
            ]
            // A debug build finds the Swift runtime under /opt (a release build has it linked in).
            if FileManager.default.fileExists(atPath: "/opt") { wrap += ["--ro-bind", "/opt", "/opt"] }
            process = try start(Self.bubblewrap, wrap + [benchExecutable] + arguments)
        } else {
            process = try start(benchExecutable, arguments)
        }
        var samples = IdentificationSamples()
        while let line = try await process.nextLine(timeLimit: .seconds(120)) {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let nanoseconds = Double(fields[1]) else {
                if line.hasPrefix("error") { throw BenchFailure("the identifying client: \(line)") }
                continue
            }
            switch fields[0] {
            case "first-get": samples.firstGet.append(nanoseconds)
            case "first-ping": samples.firstPing.append(nanoseconds)
            case "known-get": samples.knownGet.append(nanoseconds)
            case "known-ping": samples.knownPing.append(nanoseconds)
            default: break
            }
        }
        let status = await process.waitForExit()
        guard status == 0, !samples.firstGet.isEmpty else {
            throw BenchFailure("the identifying client exited with \(status): \(await process.standardError())")
        }
        return samples
    }
}

extension Roles {
    /// `settings-bench --role identify`: `count` times, a new connection's first `Get` of `key` and another new
    /// connection's first `Peer.Ping` to the broker, then a `Get` and a `Ping` on the first one; prints
    /// `first-get|first-ping|known-get|known-ping <ns>` for each.
    static func identify(address: String, key: String, count: Int) async throws {
        func get(_ connection: DBusConnection) async throws {
            _ = try await connection.call(
                destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
                interface: SettingsBusNames.interface, member: "Get", arguments: [.string(key)], timeout: .seconds(60))
        }
        func ping(_ connection: DBusConnection) async throws {
            _ = try await connection.call(
                destination: SettingsBusNames.busName, path: "/", interface: "org.freedesktop.DBus.Peer",
                member: "Ping", timeout: .seconds(60))
        }
        func timed(_ label: String, _ body: () async throws -> Void) async throws {
            let start = monotonicNanoseconds()
            try await body()
            printLine("\(label) \(monotonicNanoseconds() - start)")
        }
        for _ in 0..<count {
            let first = try await DBusConnection.connect(to: .address(address))
            let other = try await DBusConnection.connect(to: .address(address))
            try await timed("first-get") { try await get(first) }
            try await timed("first-ping") { try await ping(other) }
            try await timed("known-get") { try await get(first) }
            try await timed("known-ping") { try await ping(first) }
            await first.close()
            await other.close()
        }
    }
}
