// SPDX-License-Identifier: Apache-2.0

import Foundation
import Glibc
import SettingsBusTesting
import Testing
import TestMachine

/// The test kit's children: they get only the descriptors meant for them, and no wait for one lasts for good.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct ChildProcessTests {
    /// A pipe made without close-on-exec (as Foundation's `Pipe` makes them) by one test, while another test
    /// starts a long-lived child: the child must not hold the pipe's write end, or the first test's reader
    /// never sees end-of-file.
    @Test func aChildDoesNotInheritAnotherPipe() async throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let child = try ChildProcess.spawn("/bin/sleep", ["60"], environment: [:])
        close(fds[1])
        // With no writer left, the read end reports end-of-file: at once, or, while another test's child is
        // between its start and its exec (it holds a copy of every descriptor until it closes them), a moment
        // later. The child that inherited the write end would hold it for its whole minute.
        var entry = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 10_000) == 1, "the pipe's write end is still open in the child")
        var byte: UInt8 = 0
        #expect(read(fds[0], &byte, 1) == 0)
        close(fds[0])
        child.signal(SIGKILL)
        #expect(await child.waitForExit() == 128 + SIGKILL)
    }

    @Test func aChildThatOutlivesItsWaitIsKilled() async throws {
        let child = try ChildProcess.spawn("/bin/sleep", ["60"], environment: [:])
        #expect(await child.waitForExit(within: .milliseconds(200)) == 128 + SIGKILL)
    }

    @Test func aGrandchildHoldingTheOutputDoesNotHangTheRun() async throws {
        // The shell exits at once; the sleep it leaves behind holds its standard output.
        await #expect(throws: TestProcess.Failure.self) {
            _ = try await TestProcess.run("/bin/sh", ["-c", "sleep 30 & echo started"])
        }
    }
}
