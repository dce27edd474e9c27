// SPDX-License-Identifier: Apache-2.0

import Glibc
import SettingsModel
import SyncProtocol

/// How the broker reaches its sync process (``SyncLink``).
public enum SyncProcess: Sendable {
    /// The broker starts the program, with one end of a socket pair as its descriptor 3
    /// (`settings-sync --channel-fd 3`); the program ends when the broker closes its end.
    case start(executable: String)
    /// The sync process is started by a unit of its own (a systemd socket unit, `settings-sync.socket`), with
    /// the network the broker's unit does not have; the broker connects to its unix socket, and sends nothing
    /// unless the socket's folders and the listening process are its own user's or root's
    /// (``trustedSocketPath(_:)``, ``checkListener(of:at:)``).
    case connect(socket: String)

    /// `settings-sync` in the folder of this process's executable.
    public static func besideThisExecutable() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        let path = count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return (folder.isEmpty ? "." : folder) + "/settings-sync"
    }

    /// A sync process reached: its channel, and its pid when the broker started it.
    struct Running: Sendable {
        let channel: MessageChannel
        let pid: pid_t?

        /// After the channel closed: reaps a process the broker started (it ends when its channel closes; it
        /// is killed if it has not within 5 s). Returns how it ended, nil for a process the broker did not start.
        func end() async -> String? {
            guard let pid else { return nil }
            if let ended = await Self.reap(pid, within: .seconds(5)) { return ended }
            kill(pid, SIGKILL)
            return await Self.reap(pid, within: .seconds(5)).map { $0 + " after it was killed" } ?? "did not end"
        }

        /// Waits, without blocking a thread, for the child to end.
        private static func reap(_ pid: pid_t, within limit: Duration) async -> String? {
            let deadline = ContinuousClock.now + limit
            while true {
                var status: Int32 = 0
                let result = waitpid(pid, &status, WNOHANG)
                if result == pid {
                    let ending = ProcessSpawn.ending(ofWaitStatus: status)
                    if let code = ending.exitStatus { return "exited with status \(code)" }
                    return "was ended by signal \(ending.signal ?? 0)"
                }
                if result < 0 && errno != EINTR { return "ended" }
                guard ContinuousClock.now < deadline else { return nil }
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    /// Starts the sync process, or connects to it.
    func open() throws(Failure) -> Running {
        switch self {
        case .start(let executable):
            var pair: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
                throw Failure("cannot make a socket pair for the sync process: \(String(cString: strerror(errno)))")
            }
            let pid: pid_t
            do throws(ProcessSpawn.Failure) {
                // Its log lines go where the broker's go: standard error.
                pid = try ProcessSpawn.spawn(executable, ["--channel-fd", "3"], descriptors: [2: 2, 3: pair[1]])
            } catch {
                close(pair[0])
                close(pair[1])
                throw Failure("\(error.description) (the sync process; see --sync-process)")
            }
            close(pair[1])
            return Running(channel: MessageChannel(descriptor: pair[0], label: "settings-sync"), pid: pid)
        case .connect(let given):
            // Nothing is sent before both the path and the listener are known to be this user's (or root's).
            let path = try Self.trustedSocketPath(given)
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else {
                throw Failure("cannot make a socket for the sync process: \(String(cString: strerror(errno)))")
            }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
                close(descriptor)
                throw Failure("the sync process's socket path is too long: \(path)")
            }
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                raw.copyBytes(from: bytes)
                raw[bytes.count] = 0
            }
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard result == 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                throw Failure("cannot reach the sync process at \(path): \(reason)")
            }
            do throws(Failure) {
                try Self.checkListener(of: descriptor, at: path)
            } catch {
                close(descriptor)
                throw error
            }
            return Running(channel: MessageChannel(descriptor: descriptor, label: "settings-sync"), pid: nil)
        }
    }

    /// Why the sync process cannot be started or reached.
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
