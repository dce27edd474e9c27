// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import SyncProtocol
import Testing
import TestMachine

/// Sync runs in a process of its own (`settings-sync`): the broker holds the store and never the network;
/// the sync process holds the database and never the store; and the broker takes nothing from it on trust.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct SyncProcessTests {
    @Test func theBrokerLoadsNoNetworkOrInternationalisationCodeAndItsSyncProcessEndsWithIt() async throws {
        try await withMachines(["alpha"]) { _, machines in
            let machine = machines[0]
            try await waitForStatus(machine, "sync-state", "<'connected'>")
            let broker = machine.broker.pid
            let sync = try #require(try childProcesses(of: broker).first { $0.name == "settings-sync" })
            // The broker: FoundationEssentials at most; the sync process has Foundation, NIO and TLS.
            let brokerMaps = try String(contentsOfFile: "/proc/\(broker)/maps", encoding: .utf8)
            for library in ["libFoundation.so", "libFoundationInternationalization", "_FoundationICU", "libicu"] {
                #expect(!brokerMaps.contains(library), "the broker maps \(library)")
            }
            // Every thread of the sync process is in the sandbox: it entered it before it had a second thread.
            if Self.landlock {
                let threads = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(sync.pid)/task")
                #expect(threads.count > 1)
                for thread in threads {
                    let status = try String(contentsOfFile: "/proc/\(sync.pid)/task/\(thread)/status", encoding: .utf8)
                    #expect(status.contains("NoNewPrivs:\t1"), "thread \(thread): \(status)")
                }
            }
            // Killed, the broker's end of the channel closes, and the sync process ends by itself.
            _ = await machine.broker.kill()
            try await waitUntilEnded(sync.pid, timeLimit: .seconds(10))
        }
    }

    /// Whether the kernel has Landlock (the sync process then sandboxes itself).
    static let landlock: Bool = {
        guard let output = try? Self.checkSandbox(allowed: "/nonexistent", files: []) else { return false }
        return output.hasPrefix("sandbox: landlock")
    }()

    static func checkSandbox(allowed: String, files: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try BuiltProduct.path("settings-sync"))
        process.arguments = ["--check-sandbox", allowed] + files
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    @Test func theSyncProcessSandboxReadsItsPasswordFileAndNeitherTheStoreNorAnythingElseOfTheHome() throws {
        let folder = try storeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = folder.appendingPathComponent("settings.db")
        let password = folder.appendingPathComponent("sync-password")
        try "the store's secret values\n".write(to: store, atomically: true, encoding: .utf8)
        try "the password\n".write(to: password, atomically: true, encoding: .utf8)
        let output = try Self.checkSandbox(allowed: password.path, files: [password.path, store.path, "/etc/hostname"])
        guard output.hasPrefix("sandbox: landlock") else {
            // Without Landlock there is nothing to check from inside: the unit's sandbox is what there is.
            #expect(output.hasPrefix("sandbox: none: "), "\(output)")
            return
        }
        #expect(output.contains("\(password.path): read"), "\(output)")
        #expect(output.contains("\(store.path): refused"), "\(output)")
        #expect(output.contains("/etc/hostname: read"), "\(output)")
    }

    /// The test stands for the sync process at the broker's `--sync-socket`, and sends what a compromised
    /// one could: rows the machine would not push itself, a version it never gave, a report of fields it
    /// does not keep, and bytes that are not a message. The broker refuses each by name and keeps serving.
    @Test func aSyncProcessIsNotTrustedAndTheBrokerGoesOnWithoutIt() async throws {
        let folder = try storeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let socket = try ListeningSocket(path: folder.appendingPathComponent("sync.socket").path)
        defer { socket.close() }
        let machine = try await startMachine(
            "alpha", stores: folder,
            arguments: [
                "--sync-url", "postgres://me@localhost/settings", "--sync-dir", "/sync/", "--sync-socket", socket.path,
                "--machine-id", "id-alpha", "--machine-name", "alpha",
            ])
        defer { Task { await stopMachines([machine]) } }
        #expect(try await machine.call("Register", ["/sync/token", "s", "<''>", "{'secret': <true>}"]).status == 0)
        #expect(try await machine.call("Set", ["/sync/token", "<'pw'>"]).status == 0)
        #expect(try await machine.call("Set", ["/sync/plain", "<1>"]).status == 0)
        #expect(try await machine.call("Set", ["/other/kept", "<2>"]).status == 0)

        var channel = MessageChannel(descriptor: try await socket.accept(within: .seconds(20)), label: "test")
        let hello = try await channel.call(SyncCall.hello, [.uint32(SyncCall.version)])
        let configuration = try SyncConfiguration(channelValue: hello[0])
        #expect(configuration.machineID == "id-alpha" && configuration.passwordFile == nil)
        // Only what this machine syncs is queued: neither the secret key nor a key outside /sync/.
        let taken = try await channel.call(SyncCall.take, [.uint32(1000)])
        guard case .array(_, let changes) = taken[0] else { throw SyncTestFailure(description: "\(taken)") }
        #expect(try changes.map { try SyncChange(channelValue: $0).key.rawValue } == ["/sync/plain"])

        let now = UInt64(Date().timeIntervalSince1970 * 1000) << 16
        func row(_ revision: Int64, _ key: String, _ value: DBusValue, clock: UInt64) throws -> DBusValue {
            RemoteRow(
                change: SyncChange(key: try SettingPath(key), value: value, version: SyncVersion(clock: clock, machine: "id-evil")),
                revision: revision, machineName: "evil"
            ).channelValue
        }
        let twoDays = UInt64(2 * 24 * 3600 * 1000) << 16
        _ = try await channel.call(
            SyncCall.apply,
            [
                .array(
                    RemoteRow.channelType,
                    [
                        try row(1, "/other/kept", .int32(5), clock: now), try row(2, "/sync/token", .string("stolen"), clock: now),
                        try row(3, "/sync/far", .int32(1), clock: now + twoDays), try row(4, "/sync/good", .int32(7), clock: now),
                    ]),
                .array(RefusedRow.channelType, []), .int64(4),
            ])
        #expect(try await machine.get("/other/kept") == "(<2>,)")
        #expect(try await machine.get("/sync/token") == "(<'pw'>,)")
        #expect(try await machine.get("/sync/far") == nil)
        #expect(try await machine.get("/sync/good") == "(<7>,)")
        let refused = try #require(try await statusField(machine, "sync-refused"))
        #expect(refused.contains("/other/kept from evil: the key is outside the directories this machine syncs"), "\(refused)")
        #expect(refused.contains("/sync/token from evil: the key is secret on this machine"), "\(refused)")
        #expect(refused.contains("/sync/far from evil: its clock"), "\(refused)")
        #expect(refused.contains("more than a day ahead of this machine's"), "\(refused)")
        #expect(try await statusField(machine, "sync-cursor") == "<int64 4>")

        // A report of fields the sync process does not keep, and an error text of a megabyte: bounded.
        channel.signal("Ignored")
        try channel.send(
            DBusMessage.methodCall(
                destination: nil, path: MessageChannel.path, interface: nil, member: SyncCall.report,
                body: [
                    .dictionary(
                        key: .string, value: .variant,
                        [
                            DBusDictEntry(key: .string("sync-state"), value: .variant(.string("offline"))),
                            DBusDictEntry(key: .string("sync-error"), value: .variant(.string(String(repeating: "x", count: 1 << 20)))),
                            DBusDictEntry(key: .string("sync-machine"), value: .variant(.string("forged"))),
                        ])
                ]))
        try await waitForStatus(machine, "sync-state", "<'offline'>")
        #expect(try await statusField(machine, "sync-machine") == "<'alpha'>")
        #expect(try #require(try await statusField(machine, "sync-error")).count < 2100)

        // A version the database could not have given (newer than the change's own): refused by name, and
        // the channel closed; the broker serves on, and reaches the sync process again.
        let change = try SyncChange(channelValue: changes[0])
        let forged = try? await channel.call(
            SyncCall.acknowledge,
            [
                .array(SyncChange.channelType, [change.channelValue]),
                .array(.structure([.uint64, .string]), [.structure([.uint64(change.version.clock + 1), .string(change.version.machine)])]),
                .int64(-1),
            ])
        #expect(forged == nil)
        for await _ in channel.incoming {}
        #expect(try await machine.get("/sync/plain") == "(<1>,)")
        try await waitForStatus(machine, "sync-state", "<'error'>")
        #expect(try #require(try await statusField(machine, "sync-error")).contains("the sync process"))

        // Bytes that are not a message: the channel is closed again, and the broker is reached again later.
        let previous = try await statusField(machine, "sync-error")
        let raw = try await socket.accept(within: .seconds(20))
        let garbage = Array("this is not a D-Bus message at all\n".utf8)
        _ = garbage.withUnsafeBytes { write(raw, $0.baseAddress, $0.count) }
        channel = MessageChannel(descriptor: raw, label: "test")
        for await _ in channel.incoming {}
        try await waitForStatusChange(machine, "sync-error", from: previous)
        #expect(try #require(try await statusField(machine, "sync-error")).contains("not a D-Bus message"))
        #expect(try await machine.call("Set", ["/sync/plain", "<3>"]).status == 0)
        let again = MessageChannel(descriptor: try await socket.accept(within: .seconds(20)), label: "test")
        _ = try await again.call(SyncCall.hello, [.uint32(SyncCall.version)])
        again.close()
    }
}

extension SyncProcessTests {
    /// Under systemd the sync process is started by its own socket unit, with the network the broker's unit
    /// does not have: `systemd-socket-activate` stands for the socket unit here.
    @Test(
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate"),
            "systemd-socket-activate is missing: apt-get install -y systemd"))
    func aSyncProcessStartedByItsSocketSyncsForTheBrokerThatReachesIt() async throws {
        let postgres = try await TestPostgres.start()
        let stores = try storeFolder()
        defer { try? FileManager.default.removeItem(at: stores) }
        let socket = stores.appendingPathComponent("sync.socket").path
        // Its "Listening on …" goes to standard error, which the shell sends where the test reads.
        let activator = try RunningProcess.start(
            "/bin/sh",
            ["-c", #"exec "$0" -l "$1" "$2" 2>&1"#, "/usr/bin/systemd-socket-activate", socket,
             try BuiltProduct.path("settings-sync")])
        var machines: [Machine] = []
        try await stoppingAfterwards(postgres, { machines }) {
            try await activator.line(where: { $0.hasPrefix("Listening on \(socket)") }, timeLimit: .seconds(10))
            machines.append(
                try await startMachine(
                    "alpha", stores: stores, arguments: syncArguments(postgres, name: "alpha", extra: ["--sync-socket", socket])))
            machines.append(try await startMachine("beta", stores: stores, arguments: syncArguments(postgres, name: "beta")))
            #expect(try childProcesses(of: machines[0].broker.pid).allSatisfy { $0.name != "settings-sync" })
            #expect(try await machines[0].call("Set", ["/sync/color", "<'teal'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/color", expecting: "(<'teal'>,)")
            #expect(try await machines[1].call("Set", ["/sync/size", "<12>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/size", expecting: "(<12>,)")
        }
        // The broker closed the connection when it stopped: the sync process exits 0.
        #expect(await activator.child.waitForExit(within: .seconds(10)) == 0)
    }
}

/// The processes whose parent is `pid`: their pid and name (`comm`).
func childProcesses(of pid: Int32) throws -> [(pid: Int32, name: String)] {
    var children: [(pid: Int32, name: String)] = []
    for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc") {
        guard let child = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
            let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
        else { continue }
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        if fields.count > 1, Int32(fields[1]) == pid {
            children.append((child, String(stat[stat.index(after: open)..<close])))
        }
    }
    return children
}

/// Waits until a process has ended (gone, or a zombie its new parent has not reaped yet).
func waitUntilEnded(_ pid: Int32, timeLimit: Duration) async throws {
    let deadline = ContinuousClock.now + timeLimit
    while ContinuousClock.now < deadline {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return }
        if stat[stat.index(close, offsetBy: 2)] == "Z" { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    throw SyncTestFailure(description: "process \(pid) still runs after \(timeLimit)")
}

/// A listening unix socket, as a socket unit makes one for the sync process.
struct ListeningSocket: Sendable {
    let path: String
    let descriptor: Int32

    init(path: String) throws {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
            raw[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, listen(descriptor, 4) == 0 else { throw POSIXError(.EADDRINUSE) }
    }

    /// Accepts the next connection, waiting on a thread of its own (no task blocks).
    func accept(within limit: Duration) async throws -> Int32 {
        let descriptor = self.descriptor
        let milliseconds = Int32(limit.components.seconds * 1000)
        return try await withCheckedThrowingContinuation { continuation in
            Thread {
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, milliseconds) == 1 else {
                    return continuation.resume(throwing: SyncTestFailure(description: "no connection within \(limit)"))
                }
                let accepted = Glibc.accept(descriptor, nil, nil)
                if accepted >= 0 { continuation.resume(returning: accepted) } else {
                    continuation.resume(throwing: POSIXError(.ECONNABORTED))
                }
            }.start()
        }
    }

    func close() {
        _ = Glibc.close(descriptor)
        unlink(path)
    }
}
