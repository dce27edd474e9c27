// SPDX-License-Identifier: Apache-2.0

import DBus
import Glibc

/// The process behind each writer's unique bus name, for the history: asked of the bus daemon
/// (`GetConnectionUnixProcessID`) at a name's first write, then read from `/proc/PID/comm`, and kept per unique
/// name (unique names are never reused on a bus).
///
/// The lookup never runs on the connection's thread: a task asks the bus. A writer's first answer waits for
/// it (``whenKnown(_:_:)``), so that the writer is still connected, and its process still there, when the bus
/// and `/proc` are asked; later writes of the same name find it known and are answered at once.
final class WriterProcesses: Sendable {
    struct Process: Sendable, Hashable {
        var pid: UInt32
        var name: String
    }

    private enum Entry {
        case known(Process?)
        case looking([@Sendable () -> Void])
    }

    private let entries = Locked<[String: Entry]>([:])
    private let lookUp: @Sendable (String) async -> UInt32?
    private let found: @Sendable (String, Process) async -> Void

    /// The most names kept; then the cache starts again (as the connection's cache of users does).
    static let capacity = 4096

    /// - Parameters:
    ///   - lookUp: asks the bus for a unique name's process id (nil when it cannot tell).
    ///   - found: called with each process found (the store records it).
    init(
        lookUp: @escaping @Sendable (String) async -> UInt32?,
        found: @escaping @Sendable (String, Process) async -> Void = { _, _ in }
    ) {
        self.lookUp = lookUp
        self.found = found
    }

    /// The process of a name looked up before.
    func known(_ name: String) -> Process? {
        entries.withLock { entries in
            if case .known(let process)? = entries[name] { return process }
            return nil
        }
    }

    /// Runs `body` once the process of `name` is known (at once when it is, or when the name is empty),
    /// starting its lookup if it is not.
    func whenKnown(_ name: String, _ body: @escaping @Sendable () -> Void) {
        guard !name.isEmpty else { return body() }
        let start: Bool? = entries.withLock { entries in
            switch entries[name] {
            case .known?: return nil
            case .looking(var waiters)?:
                waiters.append(body)
                entries[name] = .looking(waiters)
                return false
            case nil:
                if entries.count >= Self.capacity { entries = [:] }
                entries[name] = .looking([body])
                return true
            }
        }
        switch start {
        case nil: body()
        case false?: break
        case true?:
            Task { [self] in
                let process = await lookUp(name).map { Process(pid: $0, name: Self.commandName(of: $0) ?? "") }
                let waiters = entries.withLock { entries -> [@Sendable () -> Void] in
                    defer { entries[name] = .known(process) }
                    if case .looking(let waiters)? = entries[name] { return waiters }
                    return []
                }
                for waiter in waiters { waiter() }
                if let process { await found(name, process) }
            }
        }
    }

    /// `/proc/PID/comm` without its newline.
    static func commandName(of pid: UInt32) -> String? {
        let fd = open("/proc/\(pid)/comm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        var bytes = buffer[..<count]
        if bytes.last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}
