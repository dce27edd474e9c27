// SPDX-License-Identifier: Apache-2.0

@testable import DBus
import Glibc
import SettingsBusTesting
import Testing
import TestMachine

/// Handlers that ask who calls (`DBusMethodCall.SenderUnixUserNeeded`) and are run again with the caller's
/// Unix user, which the connection looks up once per unique name and forgets when the name leaves.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
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
            // Then: each ran once with the user, on the connection's thread; those read before the user was known
            // ran once without it first (at least the first call), those read after it only once.
            let first = runs.withLock { $0 }
            let withoutUser = first.immediate.filter { $0 == nil }.count
            #expect(withoutUser >= 1)
            #expect(first.immediate.filter { $0 == getuid() }.count == 50)
            #expect(first.immediate.count == 50 + withoutUser)
            #expect(!first.immediateInTask.contains(true))
            // The user is kept for the caller's unique name, so a later call asks nobody.
            #expect(try await server.loop.perform { $0.senderUsers.users[clientName.rawValue]?.user } == getuid())
            #expect(try await server.loop.perform { $0.senderUsers.waiting.isEmpty })

            // An async handler gets the user the same way: at once, since it is known.
            #expect(try await call("Later") == [.uint32(getuid())])
            #expect(runs.withLock { $0.async } == [getuid()])

            // A handler that never asks runs once, with the user since it is known.
            #expect(try await call("Plain") == [.int32(2)])
            #expect(runs.withLock { $0.plain } == 1)

            // A handler that asks again though it was told is answered with Failed.
            let again = await #expect(throws: DBusError.self) { _ = try await call("Again") }
            #expect(again?.name == .failed)
            #expect(again?.message.contains("asked for the caller's user though it was given") == true)

            await client.close()
            await server.close()
        }
    }

    @Test func anInterfaceThatIdentifiesItsCallersDispatchesEveryCallKnowingTheCaller() async throws {
        try await withTestBus { bus in
            let seen = Locked<[DBusCredentials?]>([])
            let interface = DBusInterface(
                name: "org.example.Known1",
                methods: [
                    DBusMethod(name: "Who", outputs: [.init("user", .uint32), .init("pid", .uint32)], immediate: { call in
                        seen.withLock { $0.append(call.senderCredentials) }
                        return [.uint32(call.senderUnixUser ?? .max), .uint32(call.senderCredentials?.processID ?? 0)]
                    })
                ], identifiesCallers: true)
            let server = try await bus.connect()
            try await server.export([interface], at: "/org/example/Known")
            let client = try await bus.connect()
            let destination = try #require(server.uniqueName)
            // When: many calls arrive at once from a caller not yet known.
            let replies = try await withThrowingTaskGroup(of: [DBusValue].self) { group in
                for _ in 0..<30 {
                    group.addTask {
                        try await client.call(
                            destination: destination, path: "/org/example/Known", interface: "org.example.Known1",
                            member: "Who")
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            // Then: each ran once, knowing the caller's user and process (this test's own).
            #expect(replies.count == 30)
            #expect(replies.allSatisfy { $0 == [.uint32(getuid()), .uint32(UInt32(getpid()))] })
            #expect(seen.withLock { $0.count } == 30)
            #expect(seen.withLock { $0.allSatisfy { $0 != nil } })
            #expect(try await server.loop.perform { $0.senderUsers.held.isEmpty })
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
            #expect(try await server.loop.perform { $0.senderUsers.users[clientName.rawValue]?.user } == getuid())

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
