// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel
import Testing

/// Where a commit runs: a small one where the D-Bus export puts it (on the connection's thread, after the calls
/// read so far are dispatched), a large one, or one that would wait for a lock another program holds, on the
/// store's commit queue. Another program holding the store's write lock holds back writes, never reads.
@Suite(.timeLimit(.minutes(1)))
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
            // Then: a read is answered within less than the 5 s the commit may wait for the lock (the lock is
            // held no longer than needed: a write that waits more than 5 s for it fails).
            let reply = try await connection.call(
                destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
                interface: Broker.interface, member: "Get", arguments: [.string("/test/lock/read")],
                timeout: .seconds(4))
            #expect(reply == [.variant(.string("before"))])
            // The write is not visible while the lock is held: it is not durable yet.
            #expect(try await calls.serial() == serialBefore)

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

    /// Submits a changeset with a runner that keeps the work it is given, runs that work on a thread of its
    /// own, and returns that thread, the thread the writer was answered on, and the answer.
    static func place(
        _ changeset: Changeset, in store: SettingsStore
    ) async throws -> (runner: pthread_t, answered: pthread_t, result: Result<UInt64, SettingsError>) {
        let works = Locked<[@Sendable () -> Void]>([])
        let answers = Mailbox<(pthread_t, Result<UInt64, SettingsError>)>()
        let serialBefore = store.serial
        let runner: SettingsStore.CommitRunner = { work in
            works.withLock { $0.append(work) }
            return true
        }
        store.submit(changeset, runner: runner) { result in answers.push((pthread_self(), result)) }
        // Nothing is committed before the runner runs the work it was given.
        let work = works.withLock { $0 }
        #expect(work.count == 1)
        #expect(store.serial == serialBefore)
        // The work writes to the disk: on a thread of its own, as the connection's would be.
        let ranOn = Mailbox<pthread_t>()
        Thread {
            ranOn.push(pthread_self())
            work.first?()
        }.start()
        guard case .element(let thread) = await ranOn.next(timeLimit: .seconds(10)),
            case .element(let (answeredOn, result)) = await answers.next(timeLimit: .seconds(10))
        else { throw TestFailure("the changeset was not committed") }
        return (thread, answeredOn, result)
    }

    @Test func aRunnerCommitsSmallBatchesWhereItRunsAndLeavesLargeOnesToTheCommitQueue() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let store = try await SettingsStore.open(path: directory.store)

        // A one-key write commits on the runner's thread, which answers the writer.
        let small = try await Self.place(
            Changeset(sets: [(try SettingPath("/test/place/one"), .int32(1))], origin: "test"), in: store)
        #expect(small.runner == small.answered)
        #expect(try small.result.get() == store.serial)

        // A write of more keys than the limit is handed on to the commit queue, another thread.
        let keys = try (0...SettingsStore.inlineCommitLimit).map { try SettingPath("/test/place/many/k\($0)") }
        let large = try await Self.place(
            Changeset(sets: keys.map { ($0, DBusValue.int32(2)) }, origin: "test"), in: store)
        #expect(large.runner != large.answered)
        #expect(try large.result.get() == store.serial)
        #expect(store.getMany(keys).values.count == keys.count)

        // Both are durable: a reopened store has them.
        await StoreCalls.shutDown(store)
        let reopened = try await SettingsStore.open(path: directory.store)
        #expect(reopened.getMany(keys + [try SettingPath("/test/place/one")]).values.count == keys.count + 1)
        await StoreCalls.shutDown(reopened)
    }
}
