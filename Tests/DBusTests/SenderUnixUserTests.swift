// SPDX-License-Identifier: Apache-2.0

@testable import DBus
import Glibc
import SettingsBusTesting
import Testing

/// Handlers that ask who calls (`DBusMethodCall.SenderUnixUserNeeded`) and are run again with the caller's
/// Unix user, which the connection looks up once per unique name and forgets when the name leaves.
@Suite(.timeLimit(.minutes(1)))
struct SenderUnixUserTests {
    /// What the handlers saw: the user of each run (nil for a first run), and whether a task ran it.
    struct Runs {
        var immediate: [UInt32?] = []
        var immediateInTask: [Bool] = []
        var async: [UInt32?] = []
        var plain = 0
    }

    /// `org.example.Who1`: `Now() → u` (immediate) and `Later() → u` (async) answer the caller's user, asking
    /// for it; `Plain() → i` never asks; `Again() → u` asks even when it was told.
    static func interface(_ runs: Locked<Runs>) -> DBusInterface {
        DBusInterface(name: "org.example.Who1", methods: [
            DBusMethod(name: "Now", outputs: [.init("user", .uint32)], immediate: { call in
                runs.withLock {
                    $0.immediate.append(call.senderUnixUser)
                    $0.immediateInTask.append(ImmediateMethodTests.inTask())
                }
                guard let user = call.senderUnixUser else { throw DBusMethodCall.SenderUnixUserNeeded() }
                return [.uint32(user)]
            }),
            DBusMethod(name: "Later", outputs: [.init("user", .uint32)]) { call in
                runs.withLock { $0.async.append(call.senderUnixUser) }
                guard let user = call.senderUnixUser else { throw DBusMethodCall.SenderUnixUserNeeded() }
                return [.uint32(user)]
            },
            DBusMethod(name: "Plain", outputs: [.init("n", .int32)], immediate: { call in
                runs.withLock { $0.plain += 1 }
                return [.int32(call.senderUnixUser == nil ? 1 : 2)]
            }),
            DBusMethod(name: "Again", outputs: [.init("user", .uint32)], immediate: { _ in
                throw DBusMethodCall.SenderUnixUserNeeded()
            }),
        ])
    }

    @Test func aHandlerThatAsksWhoCallsRunsAgainWithTheCallersUser() async throws {
        try await withTestBus { bus in
            let runs = Locked(Runs())
            let server = try await bus.connect()
            try await server.export([Self.interface(runs)], at: "/org/example/Who")
            let client = try await bus.connect()
            let destination = try #require(server.uniqueName)
            let clientName = try #require(client.uniqueName)
            func call(_ member: MemberName) async throws -> [DBusValue] {
                try await client.call(
                    destination: destination, path: "/org/example/Who", interface: "org.example.Who1", member: member)
            }

            // When: many calls that ask arrive at once, before the user is known.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        let reply = try await call("Now")
                        #expect(reply == [.uint32(getuid())])
                    }
                }
                try await group.waitForAll()
            }
            // Then: each ran once without the user and once with it, on the connection's thread.
            let first = runs.withLock { $0 }
            #expect(first.immediate.count == 100)
            #expect(first.immediate.filter { $0 == nil }.count == 50)
            #expect(first.immediate.filter { $0 == getuid() }.count == 50)
            #expect(!first.immediateInTask.contains(true))
            // The user is kept for the caller's unique name, so a later call asks nobody.
            #expect(try await server.loop.perform { $0.senderUsers.users[clientName.rawValue] } == getuid())
            #expect(try await server.loop.perform { $0.senderUsers.waiting.isEmpty })

            // An async handler gets the user the same way.
            #expect(try await call("Later") == [.uint32(getuid())])
            #expect(runs.withLock { $0.async } == [nil, getuid()])

            // A handler that never asks runs once, without a user.
            #expect(try await call("Plain") == [.int32(1)])
            #expect(runs.withLock { $0.plain } == 1)

            // A handler that asks again though it was told is answered with Failed.
            let again = await #expect(throws: DBusError.self) { _ = try await call("Again") }
            #expect(again?.name == .failed)
            #expect(again?.message.contains("asked for the caller's user though it was given") == true)

            await client.close()
            await server.close()
        }
    }

    @Test func theUserOfANameIsForgottenWhenTheNameLeavesTheBus() async throws {
        try await withTestBus { bus in
            let runs = Locked(Runs())
            let server = try await bus.connect()
            try await server.export([Self.interface(runs)], at: "/org/example/Who")
            let client = try await bus.connect()
            let destination = try #require(server.uniqueName)
            let clientName = try #require(client.uniqueName)
            _ = try await client.call(
                destination: destination, path: "/org/example/Who", interface: "org.example.Who1", member: "Now")
            #expect(try await server.loop.perform { $0.senderUsers.users[clientName.rawValue] } == getuid())

            // Given: another connection that follows the client's name (the server follows only names leaving).
            let observer = try await bus.connect()
            let changes = Collector(try await observer.nameOwnerChanges(of: clientName))
            // When: the client leaves the bus.
            await client.close()
            let change = try await changes.next()
            #expect(change.newOwner == nil)
            // Then: the server forgets its user. The bus sent the server the signal before the reply to a call
            // the server makes after the observer heard of it, and the server's loop reads in order.
            _ = try await server.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId")
            #expect(try await server.loop.perform { $0.senderUsers.users[clientName.rawValue] } == nil)

            changes.stop()
            await observer.close()
            await server.close()
        }
    }
}
