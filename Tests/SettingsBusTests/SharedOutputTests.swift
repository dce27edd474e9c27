// SPDX-License-Identifier: Apache-2.0

import SettingsBusTesting
import Testing
import TestMachine

/// `SharedOutput`, which the benchmark reads its subscribers through: the lines of many processes on one
/// pipe, a wait for a count of matching lines, and the processes ended by their pids.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct SharedOutputTests {
    static let shell = "/bin/sh"

    @Test func aWaitReturnsOnceEveryProcessHasPrintedItsLine() async throws {
        let output = try SharedOutput()
        var pids: Set<String> = []
        for _ in 0..<20 {
            // Each prints a line of its own, some noise, then stays until it is ended.
            let child = try output.start(Self.shell, ["-c", "echo noise; echo \"initial $$\"; exec sleep 600"])
            pids.insert(String(child.pid))
        }
        let lines = try await output.lines(prefix: "initial ", count: 20)
        #expect(Set(lines.map { String($0.dropFirst("initial ".count)) }) == pids)
        await output.terminateAll()
        // The output has ended: a wait fails at once instead of waiting out its time limit.
        await #expect(throws: (any Error).self) { try await output.lines(prefix: "x", count: 1) }
    }

    @Test func linesPrintedBeforeTheWaitAreCountedAndLaterOnesWaitForTheNext() async throws {
        let output = try SharedOutput()
        try output.start(Self.shell, ["-c", "echo 'a 1'; echo 'a 2'; echo 'b 1'; echo 'a 3'; exec sleep 600"])
        #expect(try await output.lines(prefix: "a ", count: 2) == ["a 1", "a 2"])
        // What was left after the second `a` line is still there for the next wait.
        #expect(try await output.lines(prefix: "a ", count: 1) == ["a 3"])
        await output.terminateAll()
    }

    @Test func aWaitForMoreLinesThanArriveFailsAtItsTimeLimit() async throws {
        let output = try SharedOutput()
        for _ in 0..<2 { try output.start(Self.shell, ["-c", "echo 'ready'; exec sleep 600"]) }
        let error = await #expect(throws: (any Error).self) {
            try await output.lines(prefix: "ready", count: 3, timeLimit: .milliseconds(500))
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("of 3 lines starting with 'ready'"))
        await output.terminateAll()
    }

    @Test func aMissingProgramIsNamed() throws {
        let output = try SharedOutput()
        let error = #expect(throws: (any Error).self) { try output.start("/nonexistent/program", []) }
        #expect("\(error.map { "\($0)" } ?? "")".contains("/nonexistent/program"))
    }
}
