// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsModel
internal import Glibc

/// A child process started with `posix_spawn`, with every signal unblocked and set to its default action.
///
/// Foundation's `Process` passes the spawning thread's blocked-signal mask on to the child, so a daemon it
/// starts may never see SIGTERM. Test processes are started here instead, and their exit is awaited on a
/// thread of their own (`waitpid`), so no Swift task blocks.
///
/// A child gets standard input, output and error and no other descriptor of this process: a pipe that one
/// test made for its own child, inherited by a daemon another test started meanwhile, would keep its reader
/// from ever seeing end-of-file. Every wait for a child's exit is bounded (``waitForExit(within:)``).
public final class ChildProcess: Sendable {
    /// The process id.
    public let pid: Int32
    /// Held while file descriptors are made close-on-exec and while children are spawned.
    static let spawnLock = Locked(0)
    private let exit: ExitBox

    private init(pid: Int32) {
        self.pid = pid
        self.exit = ExitBox()
        let box = exit
        let thread = Thread {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            let ending = ProcessSpawn.ending(ofWaitStatus: status)
            box.finish(ending.exitStatus ?? 128 + (ending.signal ?? 0))
        }
        thread.start()
    }

    /// Starts an installed program in this process's environment plus `environment`, as
    /// ``spawn(_:_:environment:stdin:stdout:stderr:)`` does.
    ///
    /// - Throws: ``TestProcess/Failure`` when the program is missing (naming its Debian package) or cannot
    ///   start.
    static func spawnInstalled(
        _ executable: String, _ arguments: [String], adding environment: [String: String], stdin: Int32? = nil,
        stdout: Int32? = nil, stderr: Int32? = nil
    ) throws -> ChildProcess {
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw TestProcess.Failure(
                description: "\(executable) is not installed (\(TestProcess.packageHint(for: executable)))")
        }
        return try spawn(
            executable, arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
            stdin: stdin, stdout: stdout, stderr: stderr)
    }

    /// Starts a program.
    ///
    /// - Parameters:
    ///   - executable: an absolute path.
    ///   - arguments: its arguments (without the program name).
    ///   - environment: the complete environment.
    ///   - stdin: a file descriptor for standard input, or nil for /dev/null.
    ///   - stdout: a file descriptor for standard output, or nil for /dev/null.
    ///   - stderr: a file descriptor for standard error, or nil for /dev/null.
    /// - Throws: ``TestProcess/Failure`` when the program cannot be started.
    public static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String], stdin: Int32? = nil,
        stdout: Int32? = nil, stderr: Int32? = nil
    ) throws -> ChildProcess {
        let pid: pid_t
        do throws(ProcessSpawn.Failure) {
            pid = try ProcessSpawn.spawn(
                executable, arguments, environment: environment.map { "\($0.key)=\($0.value)" },
                descriptors: [0: stdin, 1: stdout, 2: stderr])
        } catch {
            throw TestProcess.Failure(description: error.description)
        }
        return ChildProcess(pid: pid)
    }

    /// Waits for the process to exit; returns its status, or 128 + the signal that ended it.
    ///
    /// A process still running after `limit` is killed with SIGKILL (and its status is then 137), so that no
    /// test waits for a child for good.
    public func waitForExit(within limit: Duration = ChildProcess.longestWait) async -> Int32 {
        let killer = Task { [pid] in
            do { try await Task.sleep(for: limit) } catch { return }
            kill(pid, SIGKILL)
        }
        defer { killer.cancel() }
        return await exit.wait()
    }

    /// How long ``waitForExit(within:)`` waits by default before it kills the child: longer than any test's
    /// own time limit.
    public static let longestWait: Duration = .seconds(300)

    /// Sends a signal to the process.
    public func signal(_ number: Int32) {
        kill(pid, number)
    }

    /// Stops the process with SIGSTOP and waits (10 s at most) until it is stopped (`T` in `/proc/PID/stat`): a
    /// signal takes effect when the process next runs, which on a loaded machine may come after the test's next
    /// call has reached it. Resume it with `SIGCONT`.
    ///
    /// - Throws: ``TestProcess/Failure`` when it is not stopped within 10 s.
    public func pause() async throws {
        signal(SIGSTOP)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            if let close = stat.lastIndex(of: ")"), stat[close...].dropFirst(2).first == "T" { return }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw TestProcess.Failure(description: "process \(pid) did not stop within 10 s of SIGSTOP")
    }
}

/// A child process with pipes to its standard input, output and error (the parent's ends).
struct PipedChild {
    let child: ChildProcess
    /// The read end of the child's standard output.
    let stdout: Int32
    /// The read end of the child's standard error.
    let stderr: Int32
    /// The write end of the child's standard input.
    let stdin: Int32

    /// Starts a program with its standard streams on pipes, in this process's environment plus `environment`.
    ///
    /// - Throws: ``TestProcess/Failure`` when the program is missing (naming its Debian package) or cannot
    ///   start.
    static func start(_ executable: String, _ arguments: [String], environment: [String: String]) throws -> PipedChild {
        let stdout = try ClosingPipe(), stderr = try ClosingPipe(), stdin = try ClosingPipe()
        let child: ChildProcess
        do {
            child = try ChildProcess.spawnInstalled(
                executable, arguments, adding: environment, stdin: stdin.readEnd, stdout: stdout.writeEnd,
                stderr: stderr.writeEnd)
        } catch {
            for fd in [stdout.readEnd, stdout.writeEnd, stderr.readEnd, stderr.writeEnd, stdin.readEnd, stdin.writeEnd] {
                close(fd)
            }
            throw error
        }
        // The child holds its own copies; closing ours lets the readers see end-of-file when it exits.
        close(stdout.writeEnd)
        close(stderr.writeEnd)
        close(stdin.readEnd)
        return PipedChild(child: child, stdout: stdout.readEnd, stderr: stderr.readEnd, stdin: stdin.writeEnd)
    }
}

/// A pipe whose ends are closed on exec, so that no other child inherits them by accident (which would keep
/// a reader from ever seeing end-of-file).
struct ClosingPipe {
    let readEnd: Int32
    let writeEnd: Int32

    init() throws {
        // pipe2(O_CLOEXEC) is not exported to Swift, so the flag is set afterwards, under the lock that
        // spawning also takes: no child can be started between the two steps.
        let fds = try ChildProcess.spawnLock.withLock { _ throws -> [Int32] in
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else {
                throw TestProcess.Failure(description: "cannot create a pipe: errno \(errno)")
            }
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            return fds
        }
        readEnd = fds[0]
        writeEnd = fds[1]
    }
}

/// The exit status of a child, delivered once to any number of waiters.
final class ExitBox: Sendable {
    private let state = Locked<(status: Int32?, waiters: [CheckedContinuation<Int32, Never>])>((nil, []))

    func finish(_ status: Int32) {
        let waiters = state.withLock { state in
            state.status = status
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = state.withLock { state in
                if state.status == nil { state.waiters.append(continuation) }
                return state.status
            }
            if let status { continuation.resume(returning: status) }
        }
    }
}
