// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBus
import SettingsBusTesting
import SettingsModel

extension Bench {
    /// Directory operations against the store's size: `ReadTree` and `List` of a directory of 3 keys with no
    /// other keys and with the plan's large store beside it, and another client's `Get` while a `ReadTree` or
    /// a `Reset` of a directory of the plan's large directory runs, against its `Get` with nothing else going on.
    /// SettingsBus only: dconf's reads happen in the reading process.
    func measureDirectories() async throws {
        var run = DirectoryRun(storeKeys: plan.directoryStoreKeys, bigKeys: plan.bigDirectoryKeys)
        try await useFreshBrokerStore("directories")
        try await ping(broker.name)
        let small = "/bench/small/"
        var transaction = SettingsTransaction()
        for name in ["a", "b", "c"] { transaction.set(try SettingPath(small + name), to: .string("value \(name)")) }
        try await settings.commit(transaction)

        progress("ReadTree and List of a 3-key directory, alone in the store (\(plan.directoryReads) each)")
        (run.smallReadTreeAlone, run.smallListAlone) = try await timeSmallReads(small)

        progress("loading \(plan.directoryStoreKeys) other keys")
        try await load(count: plan.directoryStoreKeys) { "/bench/many/d\($0 / 100)/k\($0)" }
        progress("ReadTree and List of the 3-key directory beside \(plan.directoryStoreKeys) keys")
        (run.smallReadTreeBeside, run.smallListBeside) = try await timeSmallReads(small)

        // Another client: a connection of its own, reading one key in a loop.
        let getter = try await bus.connect()
        let getKey = small + "a"
        progress("another client's Get with nothing else going on (\(plan.quietGets))")
        for _ in 0..<plan.quietGets {
            let start = monotonicNanoseconds()
            try await Self.rawGet(getKey, on: getter)
            run.quietGets.append(since: start)
        }

        let big = "/bench/big/"
        progress("loading a directory of \(plan.bigDirectoryKeys) keys")
        try await load(count: plan.bigDirectoryKeys) { "\(big)d\($0 / 1000)/k\($0)" }
        progress("another client's Get while ReadTree of the \(plan.bigDirectoryKeys)-key directory runs (\(plan.bigReads) reads)")
        let reads = GetLoop(of: getKey, on: getter)
        for _ in 0..<plan.bigReads {
            let start = monotonicNanoseconds()
            let reply = try await callBroker("ReadTree", [.string(big)])
            run.bigReadTree.append(since: start)
            guard case .dictionary(_, _, let entries)? = reply.first, entries.count == plan.bigDirectoryKeys else {
                _ = try? await reads.stop()
                throw BenchFailure("ReadTree of \(big) did not return its \(plan.bigDirectoryKeys) keys")
            }
        }
        run.getsDuringReadTree = try await reads.stop()
        progress("another client's Get while Reset of the \(plan.bigDirectoryKeys)-key directory runs (\(plan.bigResets) resets)")
        for round in 0..<plan.bigResets {
            if round > 0 { try await load(count: plan.bigDirectoryKeys) { "\(big)d\($0 / 1000)/k\($0)" } }
            let resets = GetLoop(of: getKey, on: getter)
            let start = monotonicNanoseconds()
            _ = try await callBroker("Reset", [.string(big)])
            run.bigReset.append(since: start)
            for value in try await resets.stop().values { run.getsDuringReset.append(value) }
        }
        results.directories = run
        await getter.close()
        try await broker.stop(using: connection)
    }

    /// `ReadTree` and `List` of a directory, alternating.
    private func timeSmallReads(_ directory: String) async throws -> (Samples, Samples) {
        var readTree = Samples(), list = Samples()
        // A few warm-up reads: where a read costs what the store holds, 100 of them would fill the time limit.
        let warmUp = plan.warmUp / 10
        try await boundedLoop(count: warmUp + plan.directoryReads, seconds: plan.loopSeconds) { index in
            let recorded = index >= warmUp
            var start = monotonicNanoseconds()
            _ = try await callBroker("ReadTree", [.string(directory)])
            if recorded { readTree.append(since: start) }
            start = monotonicNanoseconds()
            _ = try await callBroker("List", [.string(directory)])
            if recorded { list.append(since: start) }
        }
        return (readTree, list)
    }

    /// Stores `count` keys named by `key`, 100,000 to a commit.
    private func load(count: Int, key: (Int) -> String) async throws {
        var start = 0
        while start < count {
            var transaction = SettingsTransaction()
            for index in start..<min(start + 100_000, count) {
                transaction.set(try SettingPath(key(index)), to: .string("value of key \(index)"))
            }
            try await settings.commit(transaction)
            start += 100_000
        }
    }

    /// Another client's `Get` round trips, one after another, until ``GetLoop/stop()``.
    struct GetLoop {
        let done = Locked(false)
        let reader: Task<Samples, any Error>

        init(of key: String, on getter: DBusConnection) {
            reader = Task { [done] in try await Bench.getLoop(key, on: getter, until: done) }
        }

        func stop() async throws -> Samples {
            done.withLock { $0 = true }
            return try await reader.value
        }
    }

    /// `Get`s one after another until `done` holds.
    fileprivate static func getLoop(_ key: String, on getter: DBusConnection, until done: Locked<Bool>) async throws -> Samples {
        var samples = Samples()
        while !done.withLock({ $0 }) {
            let start = monotonicNanoseconds()
            try await rawGet(key, on: getter)
            samples.append(since: start)
        }
        return samples
    }

    /// A call to the broker on the plain connection, with a long timeout.
    private func callBroker(_ member: MemberName, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await connection.call(
            destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
            interface: SettingsBusNames.interface, member: member, arguments: arguments, timeout: .seconds(300))
    }

    /// `Get` on another connection.
    private static func rawGet(_ key: String, on other: DBusConnection) async throws {
        _ = try await other.call(
            destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
            interface: SettingsBusNames.interface, member: "Get", arguments: [.string(key)], timeout: .seconds(60))
    }
}
