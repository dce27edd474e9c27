// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// Calls, timeouts, cancellation and concurrency against a real `dbus-daemon`.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ConnectionTests {
    @Test func callsTheBusDaemon() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            let unique = try #require(connection.uniqueName)
            #expect(unique.rawValue.hasPrefix(":"))
            let reply = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetNameOwner", arguments: [.string(unique.rawValue)])
            #expect(reply == [.string(unique.rawValue)])
            await connection.close()
        }
    }

    /// The connection counts what it sends (calls and signals), for measurements; and it knows the bus's GUID, the
    /// one `GDBus` gets for the same bus.
    @Test func countsTheMessagesItSendsAndKnowsTheBusGUID() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            let before = await connection.sentMessageCount()
            for _ in 0..<5 {
                _ = try await connection.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                    member: "GetId", arguments: [])
            }
            try connection.send(DBusMessage.signal(path: "/a", interface: "org.example.A", member: "B"))
            _ = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId", arguments: [])
            #expect(await connection.sentMessageCount() - before == 7)
            let gdbus = try await TestProcess.run(
                "/usr/bin/python3",
                ["-c", "from gi.repository import Gio; print(Gio.DBusConnection.new_for_address_sync('\(bus.address)', "
                    + "Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, "
                    + "None, None).get_guid())"])
            #expect(connection.serverID.map { $0 + "\n" } == gdbus.stdout, "\(gdbus.stderr)")
            await connection.close()
        }
    }

    @Test func errorReplyKeepsTheRemoteNameAndMessage() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            let error = await #expect(throws: DBusError.self) {
                _ = try await connection.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: "GetNameOwner", arguments: [.string("org.example.Nobody")])
            }
            #expect(error?.name == .nameHasNoOwner)
            #expect(error?.message.contains("org.example.Nobody") == true)
            await connection.close()
        }
    }

    @Test func thousandConcurrentCallsAllComplete() async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            try await server.export([Fixtures.echoInterface()], at: "/org/example/Echo")
            let client = try await bus.connect()
            let destination = try #require(server.uniqueName)
            let results = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<1000 {
                    group.addTask {
                        let reply = try await client.call(
                            destination: destination, path: "/org/example/Echo", interface: "org.example.Echo1",
                            member: "Echo", arguments: [.variant(.int32(Int32(index)))])
                        return reply == [.variant(.int32(Int32(index)))]
                    }
                }
                var all: [Bool] = []
                for try await ok in group { all.append(ok) }
                return all
            }
            #expect(results.count == 1000)
            #expect(results.allSatisfy { $0 })
            await client.close()
            await server.close()
        }
    }

    @Test func callToAPeerThatNeverAnswersFailsAtItsTimeout() async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            try await server.export([Fixtures.silentInterface()], at: "/org/example/Silent")
            let client = try await bus.connect()
            let start = ContinuousClock.now
            let error = await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: server.uniqueName, path: "/org/example/Silent", interface: "org.example.Silent1",
                    member: "Wait", timeout: .milliseconds(300))
            }
            let elapsed = ContinuousClock.now - start
            #expect(error?.name == .noReply)
            #expect(error?.message == "no reply to org.example.Silent1.Wait on \(server.uniqueName!) within 0.3 s")
            #expect(elapsed >= .milliseconds(300))
            #expect(elapsed < .seconds(10))
            await client.close()
            await server.close()
        }
    }

    /// A call made while the loop waits for another call's deadline is sent from the calling task's thread,
    /// and the loop is woken to wait for the sooner deadline: the call fails at its own timeout, not at the
    /// other's two minutes (which the test's one-minute limit would not reach).
    @Test(.timeLimit(.minutes(1))) func callWithASoonerDeadlineThanAPendingOneFailsAtItsOwn() async throws {
        try await withTestBus { bus in
            let arrived = Fixtures.Signal()
            let server = try await bus.connect()
            try await server.export([Fixtures.silentInterface(arrived: arrived)], at: "/org/example/Silent")
            let client = try await bus.connect()
            let destination = server.uniqueName
            let long = Task {
                try await client.call(
                    destination: destination, path: "/org/example/Silent", interface: "org.example.Silent1",
                    member: "Wait", timeout: .seconds(120))
            }
            await arrived.wait()

            // When: with the first call pending, a call with a 300 ms timeout.
            let start = ContinuousClock.now
            let error = await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: destination, path: "/org/example/Silent", interface: "org.example.Silent1",
                    member: "Wait", timeout: .milliseconds(300))
            }

            // Then: it ends with NoReply after its own 300 ms, while the first is still pending.
            #expect(error?.name == .noReply)
            #expect(ContinuousClock.now - start >= .milliseconds(300))
            long.cancel()
            await #expect(throws: CancellationError.self) { try await long.value }
            await client.close()
            await server.close()
        }
    }

    /// Messages one task sends quickly go out partly at once from its thread and partly through the loop's
    /// queue (while the loop is busy, or when the socket is full and libdbus keeps the rest for the loop to
    /// write): the peer receives every one, in the order sent.
    @Test func signalsSentQuicklyFromATaskArriveAllInOrder() async throws {
        try await withTestBus { bus in
            let sender = try await bus.connect()
            let receiver = try await bus.connect()
            let stream = try await receiver.signals(
                matching: MatchRule(sender: sender.uniqueName, interface: "org.example.Count1", member: "Tick"))
            let received = Collector(stream)
            let padding = String(repeating: "x", count: 2048)
            let count = 3000

            // When: 3,000 signals of 2 KiB, one after another, with a call to the bus daemon every 100.
            for index in 0..<count {
                try sender.emitSignal(
                    path: "/org/example/Count", interface: "org.example.Count1", member: "Tick",
                    arguments: [.int32(Int32(index)), .string(padding)])
                if index % 100 == 99 {
                    _ = try await sender.call(
                        destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                        interface: "org.freedesktop.DBus", member: "GetId")
                }
            }

            // Then: all of them, in order.
            var numbers: [Int32] = []
            for _ in 0..<count {
                guard case .int32(let number)? = try await received.next().body.first else { break }
                numbers.append(number)
            }
            #expect(numbers == Array(0..<Int32(count)))
            received.stop()
            await receiver.close()
            await sender.close()
        }
    }

    /// The call's own timeout is 120 s and the test's limit one minute: the call can only end in time by
    /// being cancelled (no wall-clock assertion, which a loaded machine would make flaky).
    @Test(.timeLimit(.minutes(1))) func cancelledCallReturnsPromptly() async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            try await server.export([Fixtures.silentInterface()], at: "/org/example/Silent")
            let client = try await bus.connect()
            let destination = server.uniqueName
            let started = Fixtures.Signal()
            let task = Task {
                started.fire()
                _ = try await client.call(
                    destination: destination, path: "/org/example/Silent", interface: "org.example.Silent1",
                    member: "Wait", timeout: .seconds(120))
            }
            await started.wait()
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            await client.close()
            await server.close()
        }
    }

    @Test func closingFailsPendingCallsWithDisconnected() async throws {
        try await withTestBus { bus in
            let server = try await bus.connect()
            try await server.export([Fixtures.silentInterface()], at: "/org/example/Silent")
            let client = try await bus.connect()
            let destination = server.uniqueName
            let pending = Task {
                try await client.call(
                    destination: destination, path: "/org/example/Silent", interface: "org.example.Silent1",
                    member: "Wait", timeout: .seconds(120))
            }
            // The call is queued before the close, so it is either sent or refused: both end as Disconnected.
            await Task.yield()
            await client.close()
            let error = await #expect(throws: DBusError.self) { try await pending.value }
            #expect(error?.name == .disconnected)
            await #expect(throws: DBusError.self) {
                _ = try await client.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: nil, member: "GetId")
            }
            await server.close()
        }
    }

    /// A bus daemon that dies (a session ending without SIGTERM to its services) ends the connection: pending
    /// calls fail with `Disconnected` and ``DBusConnection/waitUntilClosed()`` returns.
    @Test func aDaemonThatDiesEndsTheConnection() async throws {
        let bus = try await TestBus.start()
        let connection = try await bus.connect()
        try await connection.export([Fixtures.silentInterface()], at: "/org/example/Silent")
        let client = try await bus.connect()
        let destination = connection.uniqueName
        let pending = Task {
            try await client.call(
                destination: destination, path: "/org/example/Silent", interface: "org.example.Silent1",
                member: "Wait", timeout: .seconds(120))
        }
        // When: the daemon is killed (no chance to say goodbye).
        await bus.kill()
        // Then: both connections end on their own, and the pending call fails.
        await connection.waitUntilClosed()
        await client.waitUntilClosed()
        let error = await #expect(throws: DBusError.self) { try await pending.value }
        #expect(error?.name == .disconnected)
    }

    @Test func invalidArgumentsAreRefusedBeforeLibdbusSeesThem() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            let error = await #expect(throws: DBusError.self) {
                _ = try await connection.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: nil,
                    member: "GetNameOwner", arguments: [.string("nul\0inside")])
            }
            #expect(error?.name == .invalidArgs)
            let mixed = DBusValue.array(.string, [.string("a"), .int32(1)])
            #expect(throws: DBusError.self) {
                try connection.emitSignal(path: "/a", interface: "org.example.X", member: "Y", arguments: [mixed])
            }
            // The connection still works afterwards.
            let id = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId")
            #expect(id.count == 1)
            await connection.close()
        }
    }

    @Test func connectingToNothingFailsWithTheLibdbusError() async throws {
        let error = await #expect(throws: DBusError.self) {
            _ = try await DBusConnection.connect(to: .address("unix:path=/nonexistent/settingsbus-test-bus"))
        }
        #expect(error?.name.rawValue.hasPrefix("org.freedesktop.DBus.Error.") == true)
    }
}
