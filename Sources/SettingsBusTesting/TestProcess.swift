// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
internal import Glibc

/// A child process run by a test: a real peer such as `dbus-send`, `gdbus` or a python3-dbus script.
///
/// Output is collected on threads of its own and the exit is awaited through a termination handler, so no
/// Swift task blocks while the child runs.
///
/// ```swift
/// let result = try await TestProcess.run("/usr/bin/gdbus", ["call", "--session", …], environment: bus.environment)
/// #expect(result.status == 0)
/// ```
public enum TestProcess {
    /// What a finished process left behind.
    public struct Result: Sendable {
        /// The exit status, or 128 + the signal number if a signal ended it.
        public var status: Int32
        /// Everything it wrote to standard output.
        public var stdout: String
        /// Everything it wrote to standard error.
        public var stderr: String
    }

    /// An error starting or waiting for a process.
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong.
        public var description: String
    }

    /// Runs a program to completion and returns its exit status and output.
    ///
    /// - Parameters:
    ///   - executable: an absolute path.
    ///   - arguments: its arguments.
    ///   - environment: variables added to (and overriding) this process's environment.
    ///   - input: text written to its standard input, which is then closed.
    ///   - timeLimit: the process is killed with SIGKILL after this long and the call throws.
    /// - Throws: ``Failure`` when the program is missing, cannot start, or runs past `timeLimit`.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], input: String? = nil,
        timeLimit: Duration = .seconds(60)
    ) async throws -> Result {
        let piped = try PipedChild.start(executable, arguments, environment: environment)
        let child = piped.child
        let out = PipeReader(fd: piped.stdout)
        let err = PipeReader(fd: piped.stderr)
        // Written on a thread of its own: a child that does not read its input must not block a task.
        let stdinFD = piped.stdin
        Thread {
            let writer = FileHandle(fileDescriptor: stdinFD, closeOnDealloc: true)
            if let input { try? writer.write(contentsOf: Data(input.utf8)) }
            try? writer.close()
        }.start()
        let killer = Task { () -> Bool in
            do { try await Task.sleep(for: timeLimit) } catch { return false }
            child.signal(SIGKILL)
            return true
        }
        // The killer above ends it at `timeLimit`; the wait's own bound only backs that up.
        let status = await child.waitForExit(within: timeLimit + .seconds(10))
        killer.cancel()
        let timedOut = await killer.value
        // The output ends when the child and whatever it started have closed it; a process it left running with
        // its output open is not waited for past a few seconds.
        guard let stdout = await out.text(within: .seconds(5)), let stderr = await err.text(within: .seconds(5)) else {
            throw Failure(
                description: "\(executable) \(arguments.joined(separator: " ")) exited with \(status), but a process "
                    + "it started still holds its output open")
        }
        let result = Result(status: status, stdout: stdout, stderr: stderr)
        if timedOut {
            throw Failure(
                description: "\(executable) \(arguments.joined(separator: " ")) ran past \(timeLimit) and was killed; "
                    + "stderr: \(result.stderr)")
        }
        return result
    }

    /// Names the Debian package that provides a missing tool.
    static func packageHint(for executable: String) -> String {
        switch URL(fileURLWithPath: executable).lastPathComponent {
        case "dbus-daemon": return "install it with: apt-get install -y dbus-daemon"
        case "dbus-send", "dbus-monitor": return "install it with: apt-get install -y dbus-bin"
        case "gdbus": return "install it with: apt-get install -y libglib2.0-bin"
        case "busctl": return "install it with: apt-get install -y systemd"
        case "python3": return "install it with: apt-get install -y python3 python3-dbus"
        default: return "is it built or installed?"
        }
    }
}

/// Reads a pipe to its end on a thread of its own.
///
/// This type is manually `Sendable` because its buffer is written only by the reading thread before it
/// signals completion, and read only after that signal (through the `AsyncStream`).
final class PipeReader: @unchecked Sendable {
    private var data = Data()
    private let done = AsyncStream<Void>.makeStream()

    init(fd: Int32) {
        let thread = Thread { [self] in
            let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            data = handle.readDataToEndOfFile()
            done.continuation.finish()
        }
        thread.start()
    }

    func text() async -> String {
        for await _ in done.stream {}
        return String(decoding: data, as: UTF8.self)
    }

    /// The text read, once the pipe has ended; nil if it has not ended within `limit`.
    func text(within limit: Duration) async -> String? {
        let ended = Locked<Bool?>(nil)
        return await withTaskGroup(of: String?.self) { group in
            group.addTask {
                let text = await self.text()
                return ended.withLock { state in
                    if state == nil { state = true }
                    return state == true ? text : nil
                }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                ended.withLock { state in if state == nil { state = false } }
                return nil
            }
            var found: String?
            for await result in group {
                if let result { found = result }
                if ended.withLock({ $0 }) != nil {
                    group.cancelAll()
                    break
                }
            }
            return found
        }
    }
}
