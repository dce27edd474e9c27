// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// Where a commit runs: a small one where the D-Bus export puts it (on the connection's thread, after the calls
/// read so far are dispatched), a large one, or one that would wait for a lock another program holds, on the
/// store's commit queue. Another program holding the store's write lock holds back writes, never reads.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct CommitPlacementTests {
    /// Takes the store's write lock with python3's sqlite3, prints `locked`, and keeps it until its standard
    /// input is closed.
    static let lockHolder = """
        import sqlite3, sys
        c = sqlite3.connect(sys.argv[1], isolation_level=None)
        c.execute('BEGIN IMMEDIATE')
        print('locked', flush=True)
        sys.stdin.read()
        c.execute('ROLLBACK')
        c.close()
        print('released', flush=True)
        """

    @Test func readsGoOnWhileAnotherProgramHoldsTheStoreLockAndTheWriteLandsAfter() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, storePath: directory.store)
            let connection = try await bus.connect()
            let calls = Broker(connection: connection)
            let serialBefore = try await calls.set("/test/lock/read", .string("before"))
            var rule = MatchRule(
                sender: "io.github.settingsbus.Settings1", interface: Broker.interface, member: "Changed")
            rule.arguments[0] = "/test/lock/written"
            let changes = Collector(try await connection.signals(matching: rule))

            // Given: another program holds the store's write lock.
            let holder = try RunningProcess.start(PeerScripts.python, ["-c", Self.lockHolder, directory.store])
            #expect(try await holder.nextLine(timeLimit: .seconds(10)) == "locked")

            // When: a Set arrives, followed on the same connection (so, in order) by reads.
            try connection.send(
                .methodCall(
                    destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
                    interface: Broker.interface, member: "Set",
                    body: [.string("/test/lock/written"), .variant(.int32(7))]))
            // Then: a read is answered within less than the 5 s the commit may wait for the lock, and the write
            // is not visible in it: it is not durable yet. (One call only: the lock is held no longer than
            // needed, because a write that waits more than 5 s for it fails.)
            let reply = try await connection.call(
                destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
                interface: Broker.interface, member: "GetMany",
                arguments: [.array(.string, [.string("/test/lock/read"), .string("/test/lock/written")])],
                timeout: .seconds(4))
            let read = DBusValue.dictionary(
                key: .string, value: .variant,
                [DBusDictEntry(key: .string("/test/lock/read"), value: .variant(.string("before")))])
            #expect(reply == [read, .uint64(serialBefore)])

            // When: the lock is released, the write is committed and announced.
            holder.closeInput()
            #expect(try await holder.nextLine(timeLimit: .seconds(10)) == "released")
            let changed = try await changes.next(timeLimit: .seconds(10))
            #expect(changed.body.count == 5 && changed.body[3] == .uint64(serialBefore + 1), "\(changed.body)")
            #expect(try await calls.get("/test/lock/written") == .int32(7))
            changes.stop()
            #expect(await holder.waitForExit() == 0)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// Where a written changeset was committed, and its answer.
    struct Placement {
        /// Whether the write path gave the placement the commit.
        var offered: Bool
        /// Whether the commit ran where the placement put it (its thread answered the writer).
        var ranThere: Bool
        var result: Result<UInt64, SettingsError>
    }

    /// A placement that keeps the steps it is given, for the test to run.
    struct Keeping: CommitPlacement {
        let works: Locked<[@Sendable () -> Void]>

        func place(_ step: @escaping @Sendable () -> Void) -> Bool {
            works.withLock { $0.append(step) }
            return true
        }
    }

    /// Writes a changeset through the write path with a placement that keeps the work it is given and runs it on a thread of its own,
    /// as a connection's thread would, and says where the changeset was committed.
    static func place(_ changeset: Changeset, in store: DurableStore) async throws -> Placement {
        let works = Locked<[@Sendable () -> Void]>([])
        let answers = Mailbox<(thread: pthread_t, result: Result<UInt64, SettingsError>)>()
        let serialBefore = store.serial
        WritePath(store: store).write(
            changeset, for: .then { result in answers.push((pthread_self(), result)) }, placement: Keeping(works: works))
        let work = works.withLock { $0 }
        #expect(work.count <= 1)
        var placementThread: pthread_t?
        // The placement's thread stays alive until the answer is in: an ended thread's id can be reused by the
        // thread that answers.
        let done = DispatchSemaphore(value: 0)
        defer { if placementThread != nil { done.signal() } }
        if let work = work.first {
            // Nothing is committed before the placement runs the work it was given.
            #expect(store.serial == serialBefore)
            let ranOn = Mailbox<pthread_t>()
            Thread {
                ranOn.push(pthread_self())
                work()
                done.wait()
            }.start()
            guard case .element(let thread) = await ranOn.next(timeLimit: .seconds(10)) else {
                throw TestFailure("the placement's thread did not start")
            }
            placementThread = thread
        }
        guard case .element(let answer) = await answers.next(timeLimit: .seconds(10)) else {
            throw TestFailure("the changeset was not committed")
        }
        // The writer is answered before the commit ends: wait for its end, so the next write starts a commit.
        await store.flush()
        return Placement(offered: placementThread != nil, ranThere: placementThread == answer.thread, result: answer.result)
    }

    static func one(_ key: String, _ value: Int32) throws -> Changeset {
        Changeset(sets: [(try SettingPath(key), .int32(value))], origin: "test")
    }

    @Test func aRunnerCommitsSmallBatchesWhereItRunsAndLeavesLargeOnesToTheCommitQueue() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let store = try await DurableStore.open(path: directory.store)
        // No commit counts as slow here, however loaded the machine (the next test covers slow ones).
        store.setSlowCommit(.seconds(60))

        // A one-key write commits on the placement's thread, which answers the writer.
        let small = try await Self.place(try Self.one("/test/place/one", 1), in: store)
        #expect(small.offered && small.ranThere)
        #expect(try small.result.get() == store.serial)

        // A write of more keys than the limit is handed on to the commit queue, another thread.
        let keys = try (0...DurableStore.inlineCommitLimit).map { try SettingPath("/test/place/many/k\($0)") }
        let large = try await Self.place(
            Changeset(sets: keys.map { ($0, DBusValue.int32(2)) }, origin: "test"), in: store)
        #expect(large.offered && !large.ranThere)
        #expect(try large.result.get() == store.serial)
        #expect(store.getMany(keys).values.count == keys.count)

        // Both are durable: a reopened store has them.
        await StoreCalls.shutDown(store)
        let reopened = try await DurableStore.open(path: directory.store)
        #expect(reopened.getMany(keys + [try SettingPath("/test/place/one")]).values.count == keys.count + 1)
        await StoreCalls.shutDown(reopened)
    }

    @Test func afterASlowCommitSmallOnesGoToTheCommitQueueUntilOneIsFastAgain() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let store = try await DurableStore.open(path: directory.store)

        // Given: every commit counts as slow.
        store.setSlowCommit(.zero)
        // The first small commit runs where the placement puts it; it is slow.
        let first = try await Self.place(try Self.one("/test/slow/a", 1), in: store)
        #expect(first.offered && first.ranThere)
        // So the next is not offered to the placement: the commit queue writes it.
        let second = try await Self.place(try Self.one("/test/slow/a", 2), in: store)
        #expect(!second.offered && !second.ranThere)
        #expect(try second.result.get() == store.serial)

        // When: commits are fast again, one more goes to the queue (the last was slow) and is fast,
        store.setSlowCommit(.seconds(60))
        let third = try await Self.place(try Self.one("/test/slow/a", 3), in: store)
        #expect(!third.offered)
        // then small commits run where the placement puts them again.
        let fourth = try await Self.place(try Self.one("/test/slow/a", 4), in: store)
        #expect(fourth.offered && fourth.ranThere)
        #expect(try store.get(try SettingPath("/test/slow/a")) == .int32(4))
        await StoreCalls.shutDown(store)
    }
}
