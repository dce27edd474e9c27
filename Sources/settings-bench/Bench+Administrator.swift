// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel

extension Bench {
    /// The cost of an administrator's layer: the broker on one store, started in turn with an empty folder of
    /// administrator's files and with one of ``administratorKeys`` defaults and ``administratorLocks`` locks;
    /// each start is timed, then `Get`s of a user's value (the same key both times) and of a locked key.
    func measureAdministrator() async throws {
        let folder = root.appendingPathComponent("administrator")
        let empty = folder.appendingPathComponent("none")
        let full = folder.appendingPathComponent("site")
        try Self.writeAdministratorFiles(to: full)
        for sub in ["defaults.d", "locks.d"] {
            try FileManager.default.createDirectory(
                at: empty.appendingPathComponent(sub), withIntermediateDirectories: true)
        }
        let store = folder.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)

        func configure(layer: URL?) throws {
            try configureBroker(
                store: store.appendingPathComponent("settings.db"), log: folder.appendingPathComponent("broker.log"),
                arguments: ["--admin-dir", (layer ?? empty).path])
        }
        var run = AdministratorRun(keys: Self.administratorKeys, locks: Self.administratorLocks)
        let userKey = "/bench/administrator/user"
        let lockedKey = "/bench/administrator/d0/k0"
        let rounds = max(plan.startsPerSize, 1) * 2
        let getsPerRound = max(plan.roundTrips / 5, 10)
        progress(
            "administrator's layer: \(rounds) starts with none and with \(Self.administratorKeys) defaults and "
                + "\(Self.administratorLocks) locks, in turn, \(getsPerRound) Gets after each")
        try await broker.stop(using: connection)
        try configure(layer: nil)
        try await settings.set(SettingKey(try SettingPath(userKey), default: ""), to: "mine")
        for round in 0..<rounds {
            // Each round starts with the other configuration first.
            for withLayer in round % 2 == 0 ? [false, true] : [true, false] {
                try await broker.stop(using: connection)
                try configure(layer: withLayer ? full : empty)
                let start = monotonicNanoseconds()
                try await rawGet(userKey)
                if withLayer { run.startWith.append(since: start) } else { run.startWithout.append(since: start) }
                for index in 0..<getsPerRound {
                    let start = monotonicNanoseconds()
                    try await rawGet(userKey)
                    if withLayer { run.getWith.append(since: start) } else { run.getWithout.append(since: start) }
                    if withLayer, index % 4 == 0 {
                        let start = monotonicNanoseconds()
                        try await rawGet(lockedKey)
                        run.getLocked.append(since: start)
                    }
                }
            }
        }
        try await broker.stop(using: connection)
        results.administrator = run
    }

    static let administratorKeys = 1_000
    static let administratorLocks = 100

    /// Ten files of 100 defaults each, in directories of 100, and a lock file of 99 keys and one directory.
    private static func writeAdministratorFiles(to folder: URL) throws {
        let defaults = folder.appendingPathComponent("defaults.d")
        let locks = folder.appendingPathComponent("locks.d")
        for sub in [defaults, locks] { try FileManager.default.createDirectory(at: sub, withIntermediateDirectories: true) }
        for file in 0..<(administratorKeys / 100) {
            var text = "[bench/administrator/d\(file)]\n"
            for index in 0..<100 { text += "k\(file * 100 + index)='site value \(index)'\n" }
            try text.write(to: defaults.appendingPathComponent("\(file)0-site.conf"), atomically: true, encoding: .utf8)
        }
        var lockText = "# the site's locks\n/bench/administrator/d9/\n"
        for index in 0..<(administratorLocks - 1) { lockText += "/bench/administrator/d\(index / 100)/k\(index)\n" }
        try lockText.write(to: locks.appendingPathComponent("site"), atomically: true, encoding: .utf8)
    }
}
