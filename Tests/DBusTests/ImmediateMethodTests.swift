// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBusTesting
import Testing
import TestMachine

/// Methods with an immediate handler, answered on the connection's thread (the broker's `Get`).
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct ImmediateMethodTests {
    /// `org.example.Now1`: `Echo(v) → v` and `Refuse()`, both immediate, recording whether a task ran them.
    static func interface(ranInTask: Locked<[Bool]>) -> DBusInterface {
        DBusInterface(name: "org.example.Now1", methods: [
            DBusMethod(name: "Echo", inputs: [.init("value", .variant)], outputs: [.init("value", .variant)],
                immediate: { call in
                    ranInTask.withLock { $0.append(Self.inTask()) }
                    return call.arguments
                }),
            DBusMethod(name: "Refuse", immediate: { _ in
                ranInTask.withLock { $0.append(Self.inTask()) }
                throw DBusError("org.example.Error.Refused", "not now")
            }),
            DBusMethod(name: "Wrong", outputs: [.init("n", .int32)], immediate: { _ in [.string("x")] }),
        ])
    }

    static func inTask() -> Bool { withUnsafeCurrentTask { $0 != nil } }

    @Test func anImmediateMethodIsAnsweredOutsideAnyTaskWithItsValuesOrItsError() async throws {
        try await withTestBus { bus in
            let ranInTask = Locked<[Bool]>([])
            let server = try await bus.connect()
            try await server.export([Self.interface(ranInTask: ranInTask)], at: "/org/example/Now")
            let client = try await bus.connect()
            let destination = try #require(server.uniqueName)

            // Calls from many tasks at once are each answered with their own value.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let reply = try await client.call(
                            destination: destination, path: "/org/example/Now", interface: "org.example.Now1",
                            member: "Echo", arguments: [.variant(.int32(Int32(index)))])
                        #expect(reply == [.variant(.int32(Int32(index)))])
                    }
                }
                try await group.waitForAll()
            }
            let refused = await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: destination, path: "/org/example/Now", interface: "org.example.Now1",
                    member: "Refuse")
            }
            #expect(refused?.name.rawValue == "org.example.Error.Refused")
            #expect(refused?.message == "not now")
            let wrong = await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: destination, path: "/org/example/Now", interface: "org.example.Now1",
                    member: "Wrong")
            }
            #expect(wrong?.name == .failed)
            #expect(wrong?.message.contains("returned 's' instead of 'i'") == true, "\(String(describing: wrong))")

            // Every handler ran on the connection's thread, not in a task.
            let runs = ranInTask.withLock { $0 }
            #expect(runs.count == 201)
            #expect(!runs.contains(true))
            await client.close()
            await server.close()
        }
    }
}
