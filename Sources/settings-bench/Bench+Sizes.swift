// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel

extension Bench {
    /// For each store size (no keys, then the plan's sizes): loading the keys in one call, the service's
    /// start with them, its idle memory after that start, a write's latency and the service's memory after the
    /// writes.
    func measureSizes() async throws {
        for size in [0] + plan.storeSizes {
            progress("a store of \(size) keys: load, start, idle memory, writes, memory")
            results.sizes[size] = try await brokerSize(size)
            if dconf != nil { results.dconfSizes[size] = try await dconfSize(size) }
        }
        try await broker.stop(using: connection)
        if let dconf { try await dconf.stop(using: connection) }
    }

    /// Keys are spread over directories of 100, as an application's settings are: dconf's writes slow
    /// down much more with one directory of 100,000 keys (minutes per write, measured here) than with a
    /// tree, and a tree is the fair case.
    private static func keyPath(_ index: Int) -> String { "/bench/keys/d\(index / 100)/k\(index)" }

    private func brokerSize(_ size: Int) async throws -> SizeRun {
        var run = SizeRun()
        try await useFreshBrokerStore("size-\(size)")
        try await ping(broker.name)
        // "No keys" still needs the one key that the writes below change.
        var transaction = SettingsTransaction()
        for index in 0..<max(size, 1) {
            transaction.set(try SettingPath(Self.keyPath(index)), to: .string("value of key \(index)"))
        }
        let start = monotonicNanoseconds()
        try await settings.commit(transaction)
        if size > 0 { run.load = Double(monotonicNanoseconds() - start) }
        for _ in 0..<plan.startsPerSize {
            try await broker.stop(using: connection)
            let start = monotonicNanoseconds()
            try await rawGet(Self.keyPath(0))
            run.start.append(since: start)
        }
        // Idle: started on the loaded store, its first call answered, at rest (GNOME's sources read), nothing
        // written yet.
        if let pid = broker.pid { run.idle = await ProcessMemory.readAtRest(pid: pid) }
        let key = SettingKey(try SettingPath(Self.keyPath(0)), default: "")
        try await boundedLoop(count: plan.writesPerSize, seconds: plan.loopSeconds) { index in
            let start = monotonicNanoseconds()
            try await settings.set(key, to: "written \(index)")
            run.writes.append(since: start)
        }
        run.residentKiB = broker.residentKiB
        return run
    }

    private func dconfSize(_ size: Int) async throws -> SizeRun {
        guard let dconf else { return SizeRun() }
        var run = SizeRun()
        try await useFreshDconfDatabase()
        try await ping(Self.dconfName)
        let entries = (0..<max(size, 1)).map { (key: Self.keyPath($0), value: Optional("value of key \($0)")) }
        // The changeset is serialized before the clock starts: only the call is timed.
        let blob = DconfChangeset.serialize(entries).map(DBusValue.byte)
        let start = monotonicNanoseconds()
        try await dconfChange(blob: blob)
        if size > 0 { run.load = Double(monotonicNanoseconds() - start) }
        for _ in 0..<plan.startsPerSize {
            try await dconf.stop(using: connection)
            let start = monotonicNanoseconds()
            try await ping(Self.dconfName)
            run.start.append(since: start)
        }
        // Idle, holding its database as the broker holds its store: dconf-service reads its database at its
        // first write, not at its start, so one write (of the value the key has) comes first.
        try await dconfChange([(Self.keyPath(0), "value of key 0")])
        if let pid = dconf.pid { run.idle = await ProcessMemory.readAtRest(pid: pid) }
        try await boundedLoop(count: plan.writesPerSize, seconds: plan.loopSeconds) { index in
            let start = monotonicNanoseconds()
            try await dconfChange([(Self.keyPath(0), "written \(index)")])
            run.writes.append(since: start)
        }
        run.residentKiB = dconf.residentKiB
        return run
    }
}
