// SPDX-License-Identifier: Apache-2.0

@testable import DBus
import SettingsBusTesting
import Testing
import TestMachine

/// A task that prefers a connection's executor runs on the connection's thread: its stream gets each signal
/// there, it can await calls on the same connection, and it still runs once the connection has ended.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct ConnectionExecutorTests {
    /// Two connections, and the receiver's stream of `org.example.Count1.Tick` signals from the sender.
    static func ticking(
        on bus: TestBus
    ) async throws -> (sender: DBusConnection, receiver: DBusConnection, ticks: DBusSignalStream) {
        let sender = try await bus.connect()
        let receiver = try await bus.connect()
        let rule = MatchRule(sender: sender.uniqueName, interface: "org.example.Count1", member: "Tick")
        return (sender, receiver, try await receiver.signals(matching: rule))
    }

    /// Emits `Tick(count)` from `sender`.
    static func tick(_ count: Int, from sender: DBusConnection) throws {
        try sender.emitSignal(
            path: "/org/example/Count", interface: "org.example.Count1", member: "Tick",
            arguments: [.int32(Int32(count))])
    }

    @Test func aStreamConsumedOnTheConnectionsExecutorGetsEverySignalOnThatThreadAndCanCallOut() async throws {
        try await withTestBus { bus in
            let (sender, receiver, ticks) = try await Self.ticking(on: bus)
            let onLoopThread = Locked<[Bool]>([])

            // When: a task preferring the receiver's executor consumes the stream, and answers each signal
            // with a call of its own on the same connection.
            let consumer = Task(executorPreference: receiver.executor) { () async throws -> [Int32] in
                var seen: [Int32] = []
                for await tick in ticks {
                    onLoopThread.withLock { $0.append(receiver.loop.isLoopThread) }
                    guard case .int32(let count)? = tick.body.first else { continue }
                    seen.append(count)
                    _ = try await receiver.call(
                        destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                        interface: "org.freedesktop.DBus", member: "GetId")
                    onLoopThread.withLock { $0.append(receiver.loop.isLoopThread) }
                    if count == 99 { break }
                }
                return seen
            }
            for count in 0..<100 {
                try Self.tick(count, from: sender)
            }

            // Then: every signal arrived, in order, and all of the task's code ran on the connection's thread.
            #expect(try await consumer.value == Array(0..<100))
            let threads = onLoopThread.withLock { $0 }
            #expect(threads.count == 200)
            #expect(!threads.contains(false))
            await sender.close()
            await receiver.close()
        }
    }

    /// An executor of its own that hands its jobs to a connection's, counting them.
    final class Forwarder: TaskExecutor {
        let target: DBusConnectionExecutor
        let count = Locked(0)
        init(_ target: DBusConnectionExecutor) { self.target = target }
        func enqueue(_ job: consuming ExecutorJob) {
            count.withLock { $0 += 1 }
            target.enqueue(job, as: asUnownedTaskExecutor())
        }
    }

    @Test func anExecutorThatForwardsToTheConnectionsGetsOneJobPerSignal() async throws {
        try await withTestBus { bus in
            let (sender, receiver, ticks) = try await Self.ticking(on: bus)
            let forwarder = Forwarder(receiver.executor)
            let onLoopThread = Locked<[Bool]>([])

            // When: a task preferring the forwarder consumes 50 signals, each sent after the last arrived.
            let received = Mailbox<Int32>()
            let consumer = Task(executorPreference: forwarder) {
                for await tick in ticks {
                    onLoopThread.withLock { $0.append(receiver.loop.isLoopThread) }
                    guard case .int32(let count)? = tick.body.first else { continue }
                    received.push(count)
                    if count == 49 { break }
                }
            }
            for count in 0..<50 {
                try Self.tick(count, from: sender)
                guard case .element(let got) = await received.next(timeLimit: .seconds(10)) else {
                    Issue.record("tick \(count) did not arrive")
                    break
                }
                #expect(got == Int32(count))
            }
            await consumer.value

            // Then: every job ran on the connection's thread as a job of the forwarder, so the task never
            // hopped again: about one job per signal (a job that ran under another executor's identity would
            // make the task switch back, a second job per signal).
            #expect(!onLoopThread.withLock { $0 }.contains(false))
            let jobs = forwarder.count.withLock { $0 }
            #expect(jobs <= 50 + 10, "\(jobs) jobs for 50 signals")
            await sender.close()
            await receiver.close()
        }
    }

    @Test func aTaskThatKeepsYieldingOnTheExecutorDoesNotStopTheConnectionReading() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            let stop = Locked(false)
            // Given: a task on the connection's executor that never waits for anything but its next turn.
            let spinner = Task(executorPreference: connection.executor) { () async -> Int in
                var turns = 0
                while !stop.withLock({ $0 }) {
                    turns += 1
                    await Task.yield()
                }
                return turns
            }
            // Then: calls on the same connection are still sent, read and answered (three: the task spins a
            // CPU meanwhile, which slows every other test running beside this one).
            for _ in 0..<3 {
                let reply = try await connection.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "GetId", timeout: .seconds(10))
                #expect(reply.count == 1)
            }
            stop.withLock { $0 = true }
            #expect(await spinner.value > 0)
            await connection.close()
        }
    }

    @Test func aTaskPreferringTheExecutorOfAClosedConnectionStillRuns() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            await connection.close()
            let ran = await Task(executorPreference: connection.executor) { () async -> Bool in
                // A suspension: the task is enqueued on its preferred executor again.
                await Task.yield()
                return !connection.loop.isLoopThread
            }.value
            #expect(ran)
        }
    }
}
