// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// Sync when things go wrong: the database away while machines write, a broker killed mid-sync, a clock far
/// ahead, a large first sync, a machine with values of its own joining, and the way back.
@Suite(
    .sharingTheMachine,
    .timeLimit(.minutes(10)),
    .enabled(if: TestPostgres.unavailableReason == nil, "\(TestPostgres.unavailableReason ?? "")"))
struct SyncReliabilityTests {
    @Test func writesQueuedWhileTheDatabaseIsDownAreEverywhereSoonAfterItReturns() async throws {
        try await withMachines(["alpha", "beta", "gamma"]) { postgres, machines in
            // Given: everyone connected (a first write travels).
            #expect(try await machines[0].call("Set", ["/sync/start", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/start")

            // When: the server stops; gamma makes 1,000 writes, alpha and beta write meanwhile (some keys alike).
            try await postgres.pause()
            let gamma = BusSettingsStore(bus: .address(machines[2].bus.address))
            for index in 0..<1000 {
                try await gamma.set(SettingKey<Int32>(try SettingPath("/sync/gamma/k\(index)"), default: 0), to: Int32(index))
            }
            for (index, machine) in machines.prefix(2).enumerated() {
                #expect(try await machine.call("Set", ["/sync/shared", "<'m\(index)'>"]).status == 0)
                #expect(try await machine.call("Set", ["/sync/own-\(machine.name)", "<'x'>"]).status == 0)
            }
            try await gamma.set(SettingKey<String>("/sync/shared", default: ""), to: "gamma-last")
            await gamma.close()
            try await waitForStatus(machines[2], "sync-queued", "<uint64 1001>")
            try await waitForStatus(machines[2], "sync-state", "<'offline'>")

            // Then: once the server is back, the brokers reconnect on their own and agree on everything.
            let resumed = ContinuousClock.now
            try await postgres.resume()
            try await waitForIdenticalTrees(machines, directory: "/sync/", keys: 1000 + 4, timeLimit: .seconds(90))
            let took = ContinuousClock.now - resumed
            print("identical contents \(took) after the server came back")
            #expect(try await machines[0].get("/sync/shared") == "(<'gamma-last'>,)")
        }
    }

    @Test func theServerStoppedAndRestartedMidStreamLosesNoWrite() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let writer = BusSettingsStore(bus: .address(machines[0].bus.address))
            // When: alpha writes a stream of values, and the server stops and starts again in the middle.
            for index in 0..<300 {
                if index == 100 { try await postgres.pause() }
                if index == 200 { try await postgres.resume() }
                try await writer.set(SettingKey<Int32>("/sync/stream", default: 0), to: Int32(index))
                try await writer.set(SettingKey<Int32>(try SettingPath("/sync/each/k\(index)"), default: -1), to: Int32(index))
            }
            await writer.close()
            // Then: beta has every key and the last value.
            try await waitForIdenticalTrees(machines, directory: "/sync/", keys: 301, timeLimit: .seconds(90))
            #expect(try await machines[1].get("/sync/stream") == "(<299>,)")
        }
    }

    /// The server ends the sessions (as a restart or an administrator does): the sync processes connect again
    /// and listen again on their own within seconds (an idle one notices its listening session end), and none
    /// of them stops.
    @Test func sessionsTheServerEndsAreMadeAgainAndTheSyncProcessesRunOn() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            #expect(try await machines[0].call("Set", ["/sync/ended", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ended", expecting: "(<1>,)")

            let ended = try await postgres.psql(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '\(postgres.user)'")
            #expect(ended.status == 0 && Int(ended.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 >= 4,
                "\(ended.stdout) \(ended.stderr)")

            // Then: a write on either machine reaches the other: both connected again, and listen again (within
            // less than the 30 s between periodic pulls).
            #expect(try await machines[0].call("Set", ["/sync/ended", "<2>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ended", expecting: "(<2>,)", timeLimit: .seconds(10))
            #expect(try await machines[1].call("Set", ["/sync/ended", "<3>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ended", expecting: "(<3>,)", timeLimit: .seconds(10))
            for machine in machines {
                #expect(!machine.broker.log().contains("the sync process stopped"), "\(machine.broker.log())")
            }
        }
    }

    @Test(arguments: [UInt64(11), 29, 47])
    func aBrokerKilledMidSyncLosesNoAcknowledgedWrite(seed: UInt64) async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            var generator = SeededGenerator(state: seed)
            var alpha = machines[0].broker
            var acknowledged: [String: Int32] = [:]
            for round in 0..<4 {
                // Writes as fast as they are acknowledged; SIGKILL after a random number of them.
                let store = BusSettingsStore(bus: .address(machines[0].bus.address))
                let killAfter = Int.random(in: 20...120, using: &generator)
                for index in 0..<killAfter {
                    let key = "/sync/kill/k\(Int.random(in: 0..<40, using: &generator))"
                    let value = Int32(round * 1000 + index)
                    try await store.set(SettingKey<Int32>(try SettingPath(key), default: -1), to: value)
                    acknowledged[key] = value
                }
                await store.close()
                _ = await alpha.kill()
                alpha = try await TestBroker.start(
                    on: machines[0].bus, storePath: alpha.storePath, arguments: syncArguments(postgres, name: "alpha"))
            }
            let restarted = [Machine(name: "alpha", bus: machines[0].bus, broker: alpha), machines[1]]
            try await waitForIdenticalTrees(restarted, directory: "/sync/kill/", keys: acknowledged.count, timeLimit: .seconds(90))
            for (key, value) in acknowledged {
                #expect(try await machines[1].get(key) == "(<\(value)>,)", "\(key)")
            }
            await alpha.stop()
        }
    }

    @Test func aDatabaseThatRefusesIsAClearErrorAndLocalServiceGoesOn() async throws {
        let postgres = try await TestPostgres.start()
        let stores = try storeFolder()
        defer { try? FileManager.default.removeItem(at: stores) }
        // A database whose sync schema is newer than this broker knows, and a wrong password for another.
        let made = try await postgres.psql(
            "SET ROLE settingsbus; CREATE TABLE settingsbus_meta (schema_version integer NOT NULL); "
                + "INSERT INTO settingsbus_meta VALUES (99); "
                + "CREATE TABLE settingsbus_machine (machine text)")
        #expect(made.status == 0, "\(made.stderr)")
        let wrongPassword = stores.appendingPathComponent("wrong")
        try "not-the-password\n".write(to: wrongPassword, atomically: true, encoding: .utf8)
        let busA = try await TestBus.start()
        let busB = try await TestBus.start()
        let newer = try await TestBroker.start(on: busA, arguments: syncArguments(postgres, name: "alpha"))
        var refused = syncArguments(postgres, name: "beta")
        refused[refused.firstIndex(of: postgres.passwordFile.path)!] = wrongPassword.path
        let denied = try await TestBroker.start(on: busB, arguments: refused)
        let machines = [Machine(name: "alpha", bus: busA, broker: newer), Machine(name: "beta", bus: busB, broker: denied)]
        for machine in machines {
            try await waitForStatus(machine, "sync-state", "<'error'>")
            // Local service goes on.
            #expect(try await machine.call("Set", ["/sync/local", "<1>"]).status == 0)
            #expect(try await machine.get("/sync/local") == "(<1>,)")
        }
        let newerError = try await statusField(machines[0], "sync-error")
        #expect(newerError?.contains("schema version 99") == true, "\(String(describing: newerError))")
        let deniedError = try await statusField(machines[1], "sync-error")
        #expect(deniedError?.contains("password") == true, "\(String(describing: deniedError))")
        #expect(!machines[1].broker.log().contains(postgres.password))
        await stopMachines(machines)
        await postgres.stop()
    }

    @Test func aClockAYearAheadIsClampedAndDoesNotWinForever() async throws {
        let year: Int64 = 365 * 24 * 3600 * 1000
        let postgres = try await TestPostgres.start()
        let busA = try await TestBus.start()
        let busB = try await TestBus.start()
        let ahead = try await TestBroker.start(
            on: busA, arguments: syncArguments(postgres, name: "ahead", extra: ["--sync-clock-offset", "\(year)"]))
        let honest = try await TestBroker.start(on: busB, arguments: syncArguments(postgres, name: "honest"))
        let machines = [Machine(name: "ahead", bus: busA, broker: ahead), Machine(name: "honest", bus: busB, broker: honest)]

        #expect(try await machines[0].call("Set", ["/sync/clock", "<'from the future'>"]).status == 0)
        try await waitForAgreement(machines, key: "/sync/clock")
        // The honest machine writes after it: its write wins everywhere.
        #expect(try await machines[1].call("Set", ["/sync/clock", "<'now'>"]).status == 0)
        let agreed = try await waitForAgreement(machines, key: "/sync/clock", expecting: "(<'now'>,)")
        #expect(agreed == "(<'now'>,)")
        let recorded = try await postgres.psql(
            "SELECT name FROM settingsbus_machine WHERE clock_clamped_at IS NOT NULL")
        #expect(recorded.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ahead", "\(recorded)")
        let clamped = try await statusField(machines[1], "sync-clamped-machines")
        #expect(clamped?.contains("ahead") == true, "\(String(describing: clamped))")
        await stopMachines(machines)
        await postgres.stop()
    }

    @Test func aFirstSyncOf10000KeysArrives() async throws {
        let postgres = try await TestPostgres.start()
        let stores = try storeFolder()
        defer { try? FileManager.default.removeItem(at: stores) }
        let busA = try await TestBus.start()
        let busB = try await TestBus.start()
        // Given: alpha has 10,000 values before sync is turned on.
        var alpha = try await TestBroker.start(on: busA, storePath: stores.appendingPathComponent("alpha.db").path)
        let store = BusSettingsStore(bus: .address(busA.address))
        try await store.transaction { transaction in
            for index in 0..<10_000 {
                try transaction.set(SettingKey<Int32>(try SettingPath("/sync/big/k\(index)"), default: 0), to: Int32(index))
            }
        }
        await store.close()
        _ = await alpha.stop()
        // When: alpha starts with sync, then beta.
        let started = ContinuousClock.now
        alpha = try await TestBroker.start(on: busA, storePath: alpha.storePath, arguments: syncArguments(postgres, name: "alpha"))
        let beta = try await TestBroker.start(on: busB, arguments: syncArguments(postgres, name: "beta"))
        let machines = [Machine(name: "alpha", bus: busA, broker: alpha), Machine(name: "beta", bus: busB, broker: beta)]
        try await waitForIdenticalTrees(machines, directory: "/sync/big/", keys: 10_000, timeLimit: .seconds(180))
        print("10,000 keys on the second machine \(ContinuousClock.now - started) after the first started syncing")
        await stopMachines(machines)
        await postgres.stop()
    }

    @Test func aMachineJoiningMergesItsValuesPerKeyAndRestoreBringsBackTheStoreBeforeSync() async throws {
        let postgres = try await TestPostgres.start()
        let stores = try storeFolder()
        defer { try? FileManager.default.removeItem(at: stores) }
        let busA = try await TestBus.start()
        let busB = try await TestBus.start()
        // Given: alpha syncs a value; beta, not syncing yet, has values of its own (one key alike, changed later).
        let alpha = try await TestBroker.start(on: busA, arguments: syncArguments(postgres, name: "alpha"))
        let a = Machine(name: "alpha", bus: busA, broker: alpha)
        #expect(try await a.call("Set", ["/sync/both", "<'alpha'>"]).status == 0)
        #expect(try await a.call("Set", ["/sync/alpha-only", "<1>"]).status == 0)
        var beta = try await TestBroker.start(on: busB, storePath: stores.appendingPathComponent("beta.db").path)
        var b = Machine(name: "beta", bus: busB, broker: beta)
        #expect(try await b.call("Set", ["/sync/both", "<'beta'>"]).status == 0)
        #expect(try await b.call("Set", ["/sync/beta-only", "<2>"]).status == 0)
        #expect(try await b.call("Set", ["/elsewhere/x", "<3>"]).status == 0)
        let before = try await b.call("ReadTree", ["/"])
        _ = await beta.stop()

        // When: beta joins.
        beta = try await TestBroker.start(on: busB, storePath: beta.storePath, arguments: syncArguments(postgres, name: "beta"))
        b = Machine(name: "beta", bus: busB, broker: beta)
        // Then: per key: beta's values (newer, as of its join) win, alpha's other key arrives, nothing is lost.
        try await waitForAgreement([a, b], key: "/sync/both", expecting: "(<'beta'>,)")
        try await waitForAgreement([a, b], key: "/sync/alpha-only", expecting: "(<1>,)")
        try await waitForAgreement([a, b], key: "/sync/beta-only", expecting: "(<2>,)")
        #expect(try await b.get("/elsewhere/x") == "(<3>,)")
        #expect(try await a.get("/elsewhere/x") == nil)

        // And: with beta stopped, --sync-restore puts its store back as it was before sync began.
        let storePath = beta.storePath
        _ = await beta.stop()
        let restore = try await TestProcess.run(
            try TestBroker.executablePath(), ["--store", storePath, "--sync-restore"])
        #expect(restore.status == 0, "\(restore.stderr)")
        beta = try await TestBroker.start(on: busB, storePath: storePath)
        b = Machine(name: "beta", bus: busB, broker: beta)
        #expect(try await b.call("ReadTree", ["/"]).stdout == before.stdout)
        await stopMachines([a, b])
        await postgres.stop()
    }
}

/// A field of a machine's `Status`, as gdbus prints it (`<uint64 5>`), nil when it is absent.
func statusField(_ machine: Machine, _ name: String) async throws -> String? {
    let reply = try await machine.call("Status", []).stdout
    guard let start = reply.range(of: "'\(name)': ") else { return nil }
    let rest = reply[start.upperBound...]
    var depth = 0
    var end = rest.startIndex
    for index in rest.indices {
        let character = rest[index]
        if character == "<" || character == "[" || character == "(" { depth += 1 }
        if character == ">" || character == "]" || character == ")" { depth -= 1 }
        if depth == 0 { end = rest.index(after: index); break }
    }
    return String(rest[..<end])
}

/// Waits until a field of a machine's `Status` reads `expected` (it is recounted a moment after a commit).
func waitForStatus(_ machine: Machine, _ name: String, _ expected: String, timeLimit: Duration = .seconds(30)) async throws {
    let deadline = ContinuousClock.now + timeLimit
    var seen: String?
    while ContinuousClock.now < deadline {
        seen = try await statusField(machine, name)
        if seen == expected { return }
        // Status announces nothing: ask again after the next Changed or a moment.
        try await waitForChanged(on: [machine], timeLimit: .milliseconds(250))
    }
    throw SyncTestFailure(description: "\(name) of \(machine.name) read \(String(describing: seen)), not \(expected)")
}

/// Waits until every machine's `ReadTree` of `directory` is the same and holds `keys` keys.
func waitForIdenticalTrees(
    _ machines: [Machine], directory: String, keys: Int, timeLimit: Duration
) async throws {
    let deadline = ContinuousClock.now + timeLimit
    var counts: [Int] = []
    while ContinuousClock.now < deadline {
        // ReadTree answers the values and the machine's own serial, which differs: the values are compared.
        let trees = try await machines.asyncMap { machine in
            let text = try await machine.call("ReadTree", [directory]).stdout
            return String(text[..<(text.range(of: ", uint64", options: .backwards)?.lowerBound ?? text.endIndex)])
        }
        counts = trees.map { $0.components(separatedBy: "': <").count - 1 }
        if counts.allSatisfy({ $0 == keys }), Set(trees).count == 1 { return }
        try await waitForChanged(on: machines, timeLimit: .seconds(1))
    }
    throw SyncTestFailure(description: "the machines did not agree on \(directory) within \(timeLimit): \(counts) keys")
}

