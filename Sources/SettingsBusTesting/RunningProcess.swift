// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
internal import Glibc

/// A child process that keeps running while a test talks to it: a peer service that prints a ready line,
/// or a monitor whose output the test reads line by line.
///
/// Standard output is split into lines on a thread of its own; ``nextLine(timeLimit:)`` waits for the next
/// one without blocking a Swift task, so a test waits for what the peer prints rather than sleeping.
///
/// ```swift
/// let peer = try RunningProcess.start("/usr/bin/python3", [script, "org.example.Py"], environment: bus.environment)
/// #expect(try await peer.nextLine() == "READY")
/// // … talk to the peer …
/// let status = await peer.terminate()
/// ```
///
/// - Important: Call ``terminate()`` or ``waitForExit()`` before the test ends, so that no process outlives it.
public final class RunningProcess: Sendable {
    /// The process.
    public let child: ChildProcess
    private let lines: LineQueue
    private let stderrReader: PipeReader
    private let input: Locked<FileHandle?>
    private let description: String

    private init(child: ChildProcess, lines: LineQueue, stderr: PipeReader, input: FileHandle, description: String) {
        self.child = child
        self.lines = lines
        self.stderrReader = stderr
        self.input = Locked(input)
        self.description = description
    }

    /// Starts a program whose standard output is read line by line.
    ///
    /// - Parameters:
    ///   - executable: an absolute path.
    ///   - arguments: its arguments.
    ///   - environment: variables added to (and overriding) this process's environment.
    /// - Throws: ``TestProcess/Failure`` when the program is missing or cannot start.
    public static func start(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:]
    ) throws -> RunningProcess {
        let piped = try PipedChild.start(executable, arguments, environment: environment)
        let lines = LineQueue()
        lines.startReading(piped.stdout)
        return RunningProcess(
            child: piped.child, lines: lines, stderr: PipeReader(fd: piped.stderr),
            input: FileHandle(fileDescriptor: piped.stdin, closeOnDealloc: true),
            description: ([executable] + arguments).joined(separator: " "))
    }

    /// Waits for the next line the process prints to standard output (without its newline).
    ///
    /// - Returns: the line, or nil when the process closed its output without printing another line.
    /// - Throws: ``TestProcess/Failure`` when no line arrives within `timeLimit`.
    public func nextLine(timeLimit: Duration = .seconds(30)) async throws -> String? {
        switch await lines.next(timeLimit: timeLimit) {
        case .element(let line): return line
        case .ended: return nil
        case .timedOut:
            throw TestProcess.Failure(description: "\(description) printed no line within \(timeLimit)")
        }
    }

    /// Waits for the first line that satisfies `predicate`, skipping the others.
    ///
    /// - Returns: the line; the lines skipped on the way are in `skipped` order before it.
    /// - Throws: ``TestProcess/Failure`` when the output ends, or no such line arrives within `timeLimit`.
    @discardableResult
    public func line(
        where predicate: (String) -> Bool, timeLimit: Duration = .seconds(30)
    ) async throws -> (line: String, skipped: [String]) {
        let deadline = ContinuousClock.now + timeLimit
        var skipped: [String] = []
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero, let line = try await nextLine(timeLimit: remaining) else {
                throw TestProcess.Failure(
                    description: "\(description) printed no expected line within \(timeLimit); it printed: "
                        + skipped.joined(separator: "\n"))
            }
            if predicate(line) { return (line, skipped) }
            skipped.append(line)
        }
    }

    /// Writes text to the process's standard input.
    public func write(_ text: String) {
        input.withLock { handle in
            guard let handle else { return }
            try? handle.write(contentsOf: Data(text.utf8))
        }
    }

    /// Closes the process's standard input, so that it reads end-of-file.
    public func closeInput() {
        input.withLock { handle in
            try? handle?.close()
            handle = nil
        }
    }

    /// Waits for the process to exit; returns its status, or 128 + the signal that ended it.
    public func waitForExit() async -> Int32 {
        let status = await child.waitForExit()
        closeInput()
        return status
    }

    /// Sends SIGTERM, then waits for the process to exit.
    ///
    /// - Returns: the exit status, or 128 + the signal that ended it (143 for SIGTERM).
    @discardableResult
    public func terminate() async -> Int32 {
        child.signal(SIGTERM)
        return await waitForExit()
    }

    /// Everything the process wrote to standard error; waits until it has closed its standard error.
    public func standardError() async -> String {
        await stderrReader.text()
    }
}

/// The lines a child prints, queued by a reading thread for one waiting task at a time.
final class LineQueue: Sendable {
    private let mailbox = Mailbox<String>()

    /// Starts a thread that reads `fd` to its end, queueing each line; it closes `fd` at the end.
    func startReading(_ fd: Int32) {
        let mailbox = self.mailbox
        readLines(from: fd) { lines in
            for line in lines { mailbox.push(line) }
        } ended: {
            mailbox.finish()
        }
    }

    /// The next line, `.ended` after the last one, or `.timedOut` when none arrives within `timeLimit`.
    func next(timeLimit: Duration) async -> Mailbox<String>.Outcome {
        await mailbox.next(timeLimit: timeLimit)
    }
}

/// Reads `fd` to its end on a thread of its own and closes it: each read's whole lines (without their
/// newlines) go to `lines` together, then a last line without a newline, if there is one; then `ended` runs.
func readLines(
    from fd: Int32, bufferSize: Int = 4096, _ lines: @escaping @Sendable ([String]) -> Void,
    ended: @escaping @Sendable () -> Void
) {
    let thread = Thread {
        defer { close(fd) }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: bufferSize)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            var complete: [String] = []
            for byte in buffer[0..<count] {
                if byte == UInt8(ascii: "\n") {
                    complete.append(String(decoding: pending, as: UTF8.self))
                    pending.removeAll(keepingCapacity: true)
                } else {
                    pending.append(byte)
                }
            }
            if !complete.isEmpty { lines(complete) }
        }
        if !pending.isEmpty { lines([String(decoding: pending, as: UTF8.self)]) }
        ended()
    }
    thread.start()
}
