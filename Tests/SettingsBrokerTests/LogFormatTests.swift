// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The broker's log lines: journald's priority prefixes (`<2>`) only when standard error is the stream that
/// `JOURNAL_STREAM` names, plain `settings-broker: critical: …` anywhere else.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct LogFormatTests {
    /// What makes the broker log a critical line and exit 1 before it touches a bus or a store.
    static let unknownReader = ["--secret-readers", "no-such-user-here"]
    static let message = "--secret-readers: there is no user named 'no-such-user-here'"

    /// How `JOURNAL_STREAM` is set for the broker.
    enum Stream {
        /// Not set at all.
        case unset
        /// Set to the `device:inode` of the broker's standard error.
        case standardError
        /// Set to another file's (inherited from a parent whose standard error was the journal).
        case anotherFile
    }

    /// Runs the broker with standard error in a file and returns its exit status and what it wrote there.
    static func run(_ stream: Stream) async throws -> (status: Int32, log: String) {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let log = directory.url.appendingPathComponent("stderr").path
        let fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        try #require(fd >= 0, "cannot create \(log)")
        var environment = ProcessInfo.processInfo.environment
        switch stream {
        case .unset: environment["JOURNAL_STREAM"] = nil
        case .standardError: environment["JOURNAL_STREAM"] = TestBroker.journalStream(of: fd)
        case .anotherFile:
            let other = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer { close(other) }
            environment["JOURNAL_STREAM"] = TestBroker.journalStream(of: other)
        }
        let process: ChildProcess
        do {
            defer { close(fd) }
            process = try ChildProcess.spawn(
                try TestBroker.executablePath(),
                ["--bus", "unix:path=/nonexistent/bus", "--store", directory.url.appendingPathComponent("s.db").path]
                    + unknownReader,
                environment: environment, stderr: fd)
        }
        let status = await process.waitForExit()
        return (status, try String(contentsOfFile: log, encoding: .utf8))
    }

    @Test(arguments: [Stream.unset, .anotherFile])
    func withoutTheJournalALineIsPlainText(_ stream: Stream) async throws {
        let (status, log) = try await Self.run(stream)
        #expect(status == 1, "\(log)")
        #expect(log.hasPrefix("settings-broker: critical: \(Self.message)"), "\(log)")
        #expect(!log.contains("<2>"), "\(log)")
        #expect(log.split(separator: "\n").count == 1, "\(log)")
    }

    @Test func onTheJournalsStreamALineStartsWithItsPriority() async throws {
        let (status, log) = try await Self.run(.standardError)
        #expect(status == 1, "\(log)")
        #expect(log.hasPrefix("<2>\(Self.message)"), "\(log)")
        #expect(log.split(separator: "\n").count == 1, "\(log)")
    }
}
