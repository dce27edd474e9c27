// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import SyncProtocol
import Testing
import TestMachine

/// A broker given `--sync-socket` hands the sync configuration only to a sync process of its own user (or
/// root), at a socket no other user can have put there: another user's listener, or a socket in a folder
/// others can write, gets nothing, and `Status` says why.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct SyncSocketTests {
    /// A listener that stands for another user's process at the broker's socket. It sends the sync process's
    /// first call (`Hello`), as a sync process does, and prints what it gets: `received <n> bytes` for each
    /// read, `closed after <n> bytes` at the end of the stream; then it takes the next connection (the broker
    /// tries again). With `--bind-then-drop` it binds the socket as
    /// root (so that the socket file is root's) and then listens as nobody (uid 65534), through `setpriv`.
    static let listener = #"""
        import os, socket, sys
        path, hello = sys.argv[1], bytes.fromhex(sys.argv[2])
        if sys.argv[3:] == ["--bind-then-drop"]:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            os.set_inheritable(s.fileno(), True)
            os.execv("/usr/bin/setpriv", ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                          sys.executable, sys.argv[0], path, sys.argv[2], "--fd", str(s.fileno())])
        if sys.argv[3:4] == ["--fd"]:
            s = socket.socket(fileno=int(sys.argv[4]))
        else:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
        s.listen(4)
        print("listening as uid %d" % os.getuid(), flush=True)
        while True:
            connection, _ = s.accept()
            print("accepted", flush=True)
            try:
                connection.sendall(hello)
            except OSError:
                pass
            total = 0
            while True:
                try:
                    chunk = connection.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                total += len(chunk)
                print("received %d bytes%s" % (total, " with the sync URL" if b"postgres://" in chunk else ""), flush=True)
            print("closed after %d bytes" % total, flush=True)
            connection.close()
        """#

    /// The bytes of a `Hello` call of this protocol version.
    static func helloBytes() throws -> String {
        var hello = DBusMessage.methodCall(
            destination: nil, path: MessageChannel.path, interface: nil, member: SyncCall.hello,
            body: [.uint32(SyncCall.version)])
        hello.serial = 1
        return try hello.marshalled().map { String(format: "%02x", $0) }.joined()
    }

    /// A folder for the test: mode 0755, root's, with the listener's script readable by nobody.
    static func folder() throws -> (URL, script: String) {
        let folder = try storeFolder()
        chmod(folder.path, 0o755)
        let script = folder.appendingPathComponent("listener.py").path
        try listener.write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o644)
        return (folder, script)
    }

    /// Starts a broker reaching its sync process at `socket`.
    static func broker(_ folder: URL, socket: String) async throws -> Machine {
        try await startMachine(
            "alpha", stores: folder,
            arguments: [
                "--sync-url", "postgres://me@localhost/settings", "--sync-dir", "/sync/", "--sync-socket", socket,
                "--machine-id", "id-alpha", "--machine-name", "alpha",
            ])
    }

    /// Waits until the machine's `sync-error` contains `text`, and returns it.
    static func waitForSyncError(_ machine: Machine, containing text: String) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(30)
        var seen: String?
        while ContinuousClock.now < deadline {
            seen = try await statusField(machine, "sync-error")
            if let seen, seen.contains(text) { return seen }
            try await waitForChanged(on: [machine], timeLimit: .milliseconds(250))
        }
        throw SyncTestFailure(description: "sync-error of \(machine.name) did not say \(text): \(String(describing: seen))")
    }

    /// Every line a listener printed, once it is ended.
    static func lines(ofEnded listener: RunningProcess) async throws -> [String] {
        await listener.terminate()
        var lines: [String] = []
        while let line = try await listener.nextLine(timeLimit: .seconds(10)) { lines.append(line) }
        return lines
    }

    /// The socket is root's, in a folder only root writes, but the process listening on it runs as nobody:
    /// the broker connects, sees who listens (SO_PEERCRED), and closes without sending a byte.
    @Test func aListenerOfAnotherUserGetsNothingAndStatusSaysWhy() async throws {
        let (folder, script) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let socket = folder.appendingPathComponent("sync.socket").path
        let listener = try RunningProcess.start(
            "/usr/bin/python3", [script, socket, try Self.helloBytes(), "--bind-then-drop"])
        #expect(try await listener.nextLine() == "listening as uid 65534")
        let machine = try await Self.broker(folder, socket: socket)
        defer { Task { await stopMachines([machine]) } }

        #expect(try await listener.nextLine(timeLimit: .seconds(20)) == "accepted")
        let (answer, _) = try await listener.line(where: { $0.hasPrefix("received") || $0.hasPrefix("closed") })
        #expect(answer == "closed after 0 bytes")
        let error = try await Self.waitForSyncError(machine, containing: "uid 65534")
        #expect(error.contains("neither this user") && error.contains(socket), "\(error)")
        #expect(machine.broker.log().contains("uid 65534"))
        // Local service goes on.
        #expect(try await machine.call("Set", ["/sync/plain", "<1>"]).status == 0)
        await listener.terminate()
    }

    /// A folder others can write, where nobody put a listener: the broker refuses the folder before it
    /// connects, and the listener never sees a connection.
    @Test func aSocketInAFolderOthersCanWriteIsRefusedBeforeAnythingIsSent() async throws {
        let (folder, script) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (shared, socket, listener) = try await Self.nobodysListener(in: folder, "shared", mode: 0o777, script: script)
        let machine = try await Self.broker(folder, socket: socket)
        defer { Task { await stopMachines([machine]) } }

        let error = try await Self.waitForSyncError(machine, containing: "writable by others")
        #expect(error.contains(shared.path), "\(error)")
        #expect(machine.broker.log().contains("writable by others"))
        #expect(try await machine.call("Set", ["/sync/plain", "<1>"]).status == 0)
        let printed = try await Self.lines(ofEnded: listener)
        #expect(!printed.contains("accepted"), "\(printed)")
    }

    /// A folder `name` of `mode` in `folder`, and a listener run as user nobody on `sync.socket` in it, once it
    /// listens.
    static func nobodysListener(in folder: URL, _ name: String, mode: mode_t, script: String) async throws
        -> (folder: URL, socket: String, listener: RunningProcess)
    {
        let made = folder.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: made, withIntermediateDirectories: false)
        chmod(made.path, mode)
        let socket = made.appendingPathComponent("sync.socket").path
        let listener = try RunningProcess.start(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", script, socket, try Self.helloBytes()])
        #expect(try await listener.nextLine() == "listening as uid 65534")
        return (made, socket, listener)
    }

    /// A sticky folder others can write (as /tmp) holds the socket of the broker's own user safely (no one
    /// else can replace it), but not another user's.
    @Test func aSocketOfAnotherUserInAStickyFolderIsRefused() async throws {
        let (folder, script) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (_, socket, listener) = try await Self.nobodysListener(in: folder, "sticky", mode: 0o1777, script: script)
        let machine = try await Self.broker(folder, socket: socket)
        defer { Task { await stopMachines([machine]) } }

        let error = try await Self.waitForSyncError(machine, containing: "owned by uid 65534")
        #expect(error.contains(socket), "\(error)")
        let printed = try await Self.lines(ofEnded: listener)
        #expect(!printed.contains("accepted"), "\(printed)")
    }
}
