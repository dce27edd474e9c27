// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBusTesting
import Testing
import TestMachine

/// Requesting and releasing well-known names, with every reply code, and the owner changes the bus announces.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct NameTests {
    static let name: BusName = "org.example.Name"

    @Test func requestAndReleaseGiveEveryReplyCode() async throws {
        try await withTestBus { bus in
            let a = try await bus.connect()
            let b = try await bus.connect()
            #expect(try await a.nameOwner(of: Self.name) == nil)
            #expect(try await a.requestName(Self.name) == .primaryOwner)
            #expect(try await a.requestName(Self.name) == .alreadyOwner)
            #expect(try await b.requestName(Self.name) == .exists)
            #expect(try await b.requestName(Self.name, flags: []) == .inQueue)
            #expect(try await b.nameOwner(of: Self.name) == a.uniqueName)
            // Leaving the queue is a release too.
            #expect(try await b.releaseName(Self.name) == .released)
            #expect(try await b.releaseName(Self.name) == .notOwner)
            #expect(try await b.requestName(Self.name, flags: []) == .inQueue)
            // When the owner releases, the first in the queue owns the name.
            #expect(try await a.releaseName(Self.name) == .released)
            #expect(try await a.nameOwner(of: Self.name) == b.uniqueName)
            #expect(try await a.releaseName(Self.name) == .notOwner)
            #expect(try await b.requestName(Self.name) == .alreadyOwner)
            #expect(try await a.releaseName("org.example.Nobody") == .nonExistent)
            await a.close()
            await b.close()
        }
    }

    @Test func replacementNeedsBothFlags() async throws {
        try await withTestBus { bus in
            let a = try await bus.connect()
            let b = try await bus.connect()
            let c = try await bus.connect()
            #expect(try await a.requestName(Self.name, flags: [.doNotQueue]) == .primaryOwner)
            // The owner did not allow replacement.
            #expect(try await b.requestName(Self.name, flags: [.replaceExisting, .doNotQueue]) == .exists)
            #expect(try await a.requestName(Self.name, flags: [.allowReplacement, .doNotQueue]) == .alreadyOwner)
            // Now it has.
            #expect(try await b.requestName(Self.name, flags: [.replaceExisting, .doNotQueue]) == .primaryOwner)
            #expect(try await c.nameOwner(of: Self.name) == b.uniqueName)
            #expect(try await a.releaseName(Self.name) == .notOwner)
            await a.close()
            await b.close()
            await c.close()
        }
    }

    @Test func ownerChangesAreObserved() async throws {
        try await withTestBus { bus in
            let observer = try await bus.connect()
            let a = try await bus.connect()
            let b = try await bus.connect()
            let aName = try #require(a.uniqueName), bName = try #require(b.uniqueName)
            // Given a stream of the name's owner changes (and one for another name, which sees none of them).
            let changes = try await observer.nameOwnerChanges(of: Self.name)
            let other = try await observer.nameOwnerChanges(of: "org.example.Other")
            let watchdog = closing(observer)
            // When the name is taken, queued for, released and its last owner disconnects.
            #expect(try await a.requestName(Self.name) == .primaryOwner)
            #expect(try await b.requestName(Self.name, flags: []) == .inQueue)
            #expect(try await a.releaseName(Self.name) == .released)
            await b.close()
            #expect(try await a.requestName("org.example.Other") == .primaryOwner)
            // Then the stream yields each change, in order.
            var iterator = changes.makeAsyncIterator()
            var seen: [NameOwnerChange] = []
            for _ in 0..<3 { seen.append(try #require(await iterator.next())) }
            #expect(
                seen == [
                    NameOwnerChange(name: Self.name, oldOwner: nil, newOwner: aName),
                    NameOwnerChange(name: Self.name, oldOwner: aName, newOwner: bName),
                    NameOwnerChange(name: Self.name, oldOwner: bName, newOwner: nil),
                ])
            var otherIterator = other.makeAsyncIterator()
            #expect(await otherIterator.next() == NameOwnerChange(name: "org.example.Other", oldOwner: nil, newOwner: aName))
            watchdog.cancel()
            await a.close()
            await observer.close()
        }
    }

    @Test func theBusRefusesNamesThatCannotBeOwned() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            let unique = try #require(connection.uniqueName)
            for name: BusName in [unique, "org.freedesktop.DBus"] {
                let error = await #expect(throws: DBusError.self) { try await connection.requestName(name) }
                #expect(error?.name.rawValue.hasPrefix("org.freedesktop.DBus.Error.") == true, "\(name)")
            }
            // The connection's own unique name has an owner: itself.
            #expect(try await connection.nameOwner(of: unique) == unique)
            #expect(try await connection.nameOwner(of: ":1.9999") == nil)
            await connection.close()
            await #expect(throws: DBusError.self) { try await connection.requestName(Self.name) }
        }
    }
}
