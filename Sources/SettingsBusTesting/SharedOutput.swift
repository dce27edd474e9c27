// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
internal import Glibc

/// Child processes whose standard output goes to one pipe, read on one thread, and a wait for a number of
/// matching lines that wakes its task once, when they are all there.
///
/// For many processes that each print a short line at the same moment (a benchmark's subscribers), this
/// process then takes a few wake-ups per round instead of one reading thread and one task per child, so it
/// competes less with the processes it measures. Each line must be printed with one `write` of at most
/// `PIPE_BUF` (4096) bytes, which reaches the pipe whole.
///
/// ```swift
/// let output = try SharedOutput()
/// for _ in 0..<50 { try output.start(subscriber, ["--key", key], environment: bus.environment) }
/// let ready = try await output.lines(prefix: "initial ", count: 50)
/// // … write, then:
/// let received = try await output.lines(prefix: "value-1 ", count: 50)
/// await output.terminateAll()
/// ```
///
/// - Important: Call ``terminateAll()`` when done: it ends the processes and the reading thread.
public final class SharedOutput: Sendable {
    private struct Waiter {
        var id: UInt64
        var prefix: String
        var count: Int
        var continuation: CheckedContinuation<[String]?, Never>
    }

    private struct State {
        /// Lines not taken by a wait yet.
        var lines: [String] = []
        var ended = false
        var waiter: Waiter?
        var nextID: UInt64 = 0
        /// Waits whose time ran out before they were registered.
        var expired: Set<UInt64> = []
        /// The last lines a wait passed over, for its error message.
        var skipped: [String] = []
    }

    private let state = Locked(State())
    /// The write end, closed by ``terminateAll()`` so the reading thread sees the end of the output.
    private let writeEnd: Locked<Int32?>
    private let children = Locked<[ChildProcess]>([])
    private let errorLog: String?

    /// Makes the pipe and starts its reading thread.
    ///
    /// - Parameter errorLog: a file the children's standard error is appended to (nil: /dev/null); it is
    ///   named in the error a wait throws.
    /// - Throws: ``TestProcess/Failure`` when no pipe can be made.
    public init(errorLog: String? = nil) throws {
        let pipe = try ClosingPipe()
        writeEnd = Locked(pipe.writeEnd)
        self.errorLog = errorLog
        readLines(from: pipe.readEnd, bufferSize: 65536) { [state] lines in
            let ready = state.withLock { state -> (CheckedContinuation<[String]?, Never>, [String])? in
                state.lines += lines
                return Self.satisfy(&state)
            }
            if let (continuation, taken) = ready { continuation.resume(returning: taken) }
        } ended: { [state] in
            let waiter = state.withLock { state -> CheckedContinuation<[String]?, Never>? in
                state.ended = true
                defer { state.waiter = nil }
                return state.waiter?.continuation
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Takes the matching lines out of the state when the waiter has all it asked for; the lines before the
    /// last of them are dropped.
    private static func satisfy(_ state: inout State) -> (CheckedContinuation<[String]?, Never>, [String])? {
        guard let waiter = state.waiter else { return nil }
        var taken: [String] = []
        var end = 0
        for (index, line) in state.lines.enumerated() where line.hasPrefix(waiter.prefix) {
            taken.append(line)
            end = index + 1
            if taken.count == waiter.count { break }
        }
        guard taken.count == waiter.count else { return nil }
        state.skipped = Array(state.lines[..<end].filter { !$0.hasPrefix(waiter.prefix) }.suffix(10))
        state.lines.removeFirst(end)
        state.waiter = nil
        return (waiter.continuation, taken)
    }

    /// Starts a program with its standard output on the shared pipe, in this process's environment plus
    /// `environment`.
    ///
    /// - Throws: ``TestProcess/Failure`` when the program is missing or cannot start, or the output was
    ///   closed by ``terminateAll()``.
    @discardableResult
    public func start(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:]
    ) throws -> ChildProcess {
        guard let output = writeEnd.withLock({ $0 }) else {
            throw TestProcess.Failure(description: "the shared output was closed")
        }
        var errors: Int32?
        if let errorLog {
            errors = open(errorLog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
            guard errors! >= 0 else {
                throw TestProcess.Failure(description: "cannot open \(errorLog): errno \(errno)")
            }
        }
        defer { if let errors { close(errors) } }
        let child = try ChildProcess.spawnInstalled(
            executable, arguments, adding: environment, stdout: output, stderr: errors)
        children.withLock { $0.append(child) }
        return child
    }

    /// Waits until the processes have printed `count` lines that start with `prefix` since the last wait
    /// took its lines, and returns them in the order they arrived; lines before the last of them that do
    /// not match are dropped.
    ///
    /// - Throws: ``TestProcess/Failure`` when the output ends, or the lines do not all arrive within
    ///   `timeLimit`.
    public func lines(prefix: String, count: Int, timeLimit: Duration = .seconds(60)) async throws -> [String] {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        let timer = Task { [state] in
            do { try await Task.sleep(for: timeLimit) } catch { return }
            let waiter = state.withLock { state -> CheckedContinuation<[String]?, Never>? in
                guard let waiter = state.waiter, waiter.id == id else {
                    state.expired.insert(id)
                    return nil
                }
                state.waiter = nil
                return waiter.continuation
            }
            waiter?.resume(returning: nil)
        }
        defer { timer.cancel() }
        let taken = await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [String]?? in
                state.waiter = Waiter(id: id, prefix: prefix, count: count, continuation: continuation)
                if let (_, taken) = Self.satisfy(&state) { return .some(taken) }
                guard state.ended || state.expired.remove(id) != nil else { return .none }
                state.waiter = nil
                return .some(nil)
            }
            if let ready { continuation.resume(returning: ready) }
        }
        guard let taken else {
            let (received, skipped) = state.withLock { state in
                (state.lines.filter { $0.hasPrefix(prefix) }.count, state.skipped + state.lines.suffix(10))
            }
            throw TestProcess.Failure(
                description: "\(received) of \(count) lines starting with '\(prefix)' arrived within \(timeLimit)"
                    + (errorLog.map { " (the processes' errors are in \($0))" } ?? "") + "; other lines: "
                    + skipped.joined(separator: " | "))
        }
        return taken
    }

    /// Sends SIGTERM to every process started here, waits for them to exit and closes the output.
    public func terminateAll() async {
        let all = children.withLock { children in
            defer { children = [] }
            return children
        }
        for child in all { child.signal(SIGTERM) }
        for child in all { _ = await child.waitForExit() }
        if let fd = writeEnd.withLock({ fd -> Int32? in
            defer { fd = nil }
            return fd
        }) {
            close(fd)
        }
    }
}
