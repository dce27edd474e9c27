// SPDX-License-Identifier: Apache-2.0

@testable import DBus
import SettingsBusTesting
import Testing
import TestMachine

/// Methods with a deferred handler that answer from work run after dispatch (the broker's small commits).
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct DeferredMethodTests {
    /// The calls waiting for the next batch, and what each batch was.
    struct Batches {
        var waiting: [(value: Int32, reply: DBusReply)] = []
        var sizes: [Int] = []
        var ranInTask: [Bool] = []
        var refused = 0
        /// A reply already answered, kept to ask for work after dispatch from elsewhere.
        var kept: DBusReply?
    }

    /// `org.example.Batch1`: `Add(i) → (i, n)`, answered by work after dispatch with `n`, the size of the batch
    /// the call was answered in.
    static func interface(_ batches: Locked<Batches>) -> DBusInterface {
        DBusInterface(name: "org.example.Batch1", methods: [
            DBusMethod(
                name: "Add", inputs: [.init("value", .int32)], outputs: [.init("value", .int32), .init("batch", .int32)],
                deferred: { call, reply in
                    guard case .int32(let value) = call.arguments[0] else { return }
                    let first = batches.withLock { state in
                        state.waiting.append((value, reply))
                        return state.waiting.count == 1
                    }
                    guard first else { return }
                    let scheduled = reply.afterDispatch {
                        let waiting = batches.withLock { state in
                            defer { state.waiting = [] }
                            state.sizes.append(state.waiting.count)
                            state.ranInTask.append(ImmediateMethodTests.inTask())
                            return state.waiting
                        }
                        batches.withLock { $0.kept = waiting.last?.reply }
                        for call in waiting {
                            call.reply.send(.success([.int32(call.value), .int32(Int32(waiting.count))]))
                        }
                    }
                    if !scheduled { batches.withLock { $0.refused += 1 } }
                }),
        ])
    }

    @Test func workAfterDispatchAnswersEveryCallReadBeforeItOutsideAnyTask() async throws {
        try await withTestBus { bus in
            let batches = Locked(Batches())
            let server = try await bus.connect()
            try await server.export([Self.interface(batches)], at: "/org/example/Batch")
            let client = try await bus.connect()
            let destination = try #require(server.uniqueName)

            // When: many calls arrive at once.
            let replies = try await withThrowingTaskGroup(of: [DBusValue].self) { group in
                for index in 0..<100 {
                    group.addTask {
                        try await client.call(
                            destination: destination, path: "/org/example/Batch", interface: "org.example.Batch1",
                            member: "Add", arguments: [.int32(Int32(index))], timeout: .seconds(20))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }

            // Then: each is answered with its own value, by work that ran on the connection's thread once for
            // all the calls read before it: fewer batches than calls, none of them in a task.
            #expect(Set(replies.map { $0.first }) == Set((0..<100).map { DBusValue.int32(Int32($0)) }))
            let state = batches.withLock { $0 }
            #expect(state.refused == 0)
            #expect(state.waiting.isEmpty)
            #expect(state.sizes.reduce(0, +) == 100)
            #expect(state.sizes.count < 100, "batch sizes: \(state.sizes)")
            #expect(!state.ranInTask.contains(true))
            let largest = replies.compactMap { reply -> Int32? in
                guard reply.count == 2, case .int32(let size) = reply[1] else { return nil }
                return size
            }.max()
            #expect(largest == Int32(state.sizes.max() ?? 0))
            // Off the connection's thread (here, a task) the work is refused and does not run.
            let ran = Locked(false)
            #expect(try #require(state.kept).afterDispatch { ran.withLock { $0 = true } } == false)
            #expect(ran.withLock { $0 } == false)
            await client.close()
            await server.close()
        }
    }

    @Test func messagesSentByWorkAfterDispatchKeepTheirOrderBehindQueuedJobs() async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            let client = try await bus.connect()
            let ticks = try await client.signals(
                matching: MatchRule(sender: server.uniqueName, interface: "org.example.Order1", member: "Tick"))
            let collector = Collector(ticks)
            @Sendable func tick(_ number: Int32) -> DBusMessage {
                .signal(
                    path: "/org/example/Order", interface: "org.example.Order1", member: "Tick",
                    body: [.int32(number)])
            }
            // `Go()` answers from work after dispatch, which sends tick 0 (at once: nothing is queued), queues the
            // sending of tick 1 as a job (as a send from another thread would be), then sends tick 2 and answers:
            // those two must go behind that job.
            let go = DBusMethod(name: "Go", deferred: { _, reply in
                _ = reply.afterDispatch {
                    try? server.send(tick(0))
                    server.loop.enqueue { $0.send(tick(1)) }
                    try? server.send(tick(2))
                    reply.send(.success([]))
                }
            })
            try await server.export([DBusInterface(name: "org.example.Order1", methods: [go])], at: "/org/example/Order")
            _ = try await client.call(
                destination: server.uniqueName!, path: "/org/example/Order", interface: "org.example.Order1",
                member: "Go")

            // Then: the ticks arrive in the order they were given.
            var numbers: [DBusValue] = []
            for _ in 0..<3 { numbers.append(try await collector.next().body.first ?? .int32(-1)) }
            #expect(numbers == [.int32(0), .int32(1), .int32(2)])
            collector.stop()
            await client.close()
            await server.close()
        }
    }
}
