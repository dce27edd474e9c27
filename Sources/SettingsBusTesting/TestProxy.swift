// SPDX-License-Identifier: Apache-2.0

import Foundation

/// A TCP proxy on 127.0.0.1 that stands for a network which can be cut: put between a broker and
/// ``TestPostgres``, it forwards until ``cut()``, then black-holes (it forwards nothing more, on the
/// connections it has and on any new one, and closes none of them: a peer notices nothing but silence), and
/// after ``heal()`` forwards new connections again. The connections of the cut stay silent, as connections
/// whose packets were lost for long are.
///
/// It is a `python3` process (standard library only) told what to do on its standard input; each command is
/// acknowledged on its standard output, so a test waits for the state, not for a time.
///
/// ```swift
/// let proxy = try await TestProxy.start(to: postgres.port)
/// let url = "postgres://\(postgres.user)@127.0.0.1:\(proxy.port)/\(postgres.database)"
/// try await proxy.cut()
/// try await proxy.heal()
/// await proxy.stop()
/// ```
public final class TestProxy: Sendable {
    /// The proxy's port on 127.0.0.1.
    public let port: Int
    private let process: RunningProcess
    private let script: URL

    private init(port: Int, process: RunningProcess, script: URL) {
        self.port = port
        self.process = process
        self.script = script
    }

    /// Starts a proxy to `127.0.0.1:targetPort`.
    ///
    /// - Throws: ``TestProcess/Failure`` when `python3` is missing or the proxy does not start.
    public static func start(to targetPort: Int) async throws -> TestProxy {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-proxy-\(UUID()).py")
        try source.write(to: script, atomically: true, encoding: .utf8)
        let process = try RunningProcess.start("/usr/bin/python3", ["-u", script.path, "\(targetPort)"])
        guard let line = try await process.nextLine(), line.hasPrefix("port "), let port = Int(line.dropFirst(5)) else {
            _ = await process.terminate()
            try? FileManager.default.removeItem(at: script)
            throw TestProcess.Failure(description: "the test proxy did not start: \(await process.standardError())")
        }
        return TestProxy(port: port, process: process, script: script)
    }

    /// Cuts the network: from now on nothing is forwarded, and nothing is closed.
    public func cut() async throws {
        process.write("cut\n")
        try await process.line(where: { $0 == "cut" })
    }

    /// Heals the network: new connections are forwarded again (those of the cut stay silent).
    public func heal() async throws {
        process.write("heal\n")
        try await process.line(where: { $0 == "healed" })
    }

    /// Ends the proxy and its connections.
    public func stop() async {
        process.closeInput()
        _ = await process.terminate()
        try? FileManager.default.removeItem(at: script)
    }

    private static let source = #"""
import selectors, socket, sys, threading

target = int(sys.argv[1])
state = {"cut": False}
lock = threading.Lock()
selector = selectors.DefaultSelector()
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
listener.setblocking(False)
pairs = {}   # socket -> [peer socket or None, silent]

def accept():
    client, _ = listener.accept()
    client.setblocking(False)
    if state["cut"]:
        pairs[client] = [None, True]
    else:
        upstream = socket.create_connection(("127.0.0.1", target))
        upstream.setblocking(False)
        pairs[client] = [upstream, False]
        pairs[upstream] = [client, False]
        selector.register(upstream, selectors.EVENT_READ)
    selector.register(client, selectors.EVENT_READ)

def close(sock):
    entry = pairs.pop(sock, None)
    try:
        selector.unregister(sock)
    except Exception:
        pass
    sock.close()
    if entry and entry[0] is not None and entry[0] in pairs:
        close(entry[0])

def forward(sock):
    try:
        data = sock.recv(65536)
    except OSError:
        data = b""
    entry = pairs.get(sock)
    if entry is None:
        return
    if entry[1]:
        if not data:
            selector.unregister(sock)  # the peer closed: its end stays open, silent, and is not read again
        return  # black-holed: read and dropped, never closed
    if not data:
        close(sock)
        return
    try:
        entry[0].sendall(data)
    except OSError:
        close(sock)

def commands():
    for line in sys.stdin:
        command = line.strip()
        with lock:
            if command == "cut":
                state["cut"] = True
                for entry in pairs.values():
                    entry[1] = True
            elif command == "heal":
                state["cut"] = False
        print("cut" if command == "cut" else "healed", flush=True)
    state["end"] = True

selector.register(listener, selectors.EVENT_READ)
print("port %d" % listener.getsockname()[1], flush=True)
threading.Thread(target=commands, daemon=True).start()
while not state.get("end"):
    events = selector.select(timeout=0.05)
    with lock:  # the command thread changes the state between two rounds, never during one
        for key, _ in events:
            if key.fileobj is listener:
                accept()
            elif key.fileobj in pairs:
                forward(key.fileobj)
"""#
}
