// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBus
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// Brokers on private buses with their own stores, standing for machines, syncing through a private
/// PostgreSQL server (docs/sync.md).
@Suite(
    .sharingTheMachine,
    .timeLimit(.minutes(5)),
    .enabled(if: TestPostgres.unavailableReason == nil, "\(TestPostgres.unavailableReason ?? "")"))
struct SyncAcrossMachinesTests {
    @Test func aWriteOnAReachesAStreamAndAMonitorOnBWithOneChangedNamingA() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            let store = BusSettingsStore(bus: .address(b.bus.address))
            let values = Collector(store.values(for: SettingKey<String>("/sync/theme", default: "light")))
            #expect(try await values.next() == "light")
            let monitor = try RunningProcess.start(
                "/usr/bin/gdbus",
                ["monitor", "--address", b.bus.address, "--dest", "io.github.settingsbus.Settings1"])
            try await monitor.line(where: { $0.contains("is owned by") })

            // When: A writes the key.
            let set = try await a.call("Set", ["/sync/theme", "<'dark'>"])
            #expect(set.status == 0, "\(set.stderr)")

            // Then: B's watcher gets it, and B's bus carries one Changed whose origin names A.
            #expect(try await values.next(timeLimit: .seconds(30)) == "dark")
            // And: B's view holds it, so an app of B's that does not watch it reads it there, with no message.
            let reader = BusSettingsStore(bus: .address(b.bus.address), viewFolder: b.broker.viewFolder)
            _ = try await reader.uniqueName()
            let sent = await reader.sentMessageCount()
            #expect(try await reader.get(SettingKey<String>("/sync/theme", default: "light")) == "dark")
            #expect(await reader.sentMessageCount() == sent)
            await reader.close()
            let changed = try await monitor.line(where: { $0.contains(".Changed") }, timeLimit: .seconds(30))
            #expect(changed.line.contains("/sync/theme") && changed.line.contains("'sync:alpha'"), "\(changed.line)")
            // A second write shows that no other Changed came for the first.
            #expect(try await a.call("Set", ["/sync/after", "<1>"]).status == 0)
            let next = try await monitor.line(where: { $0.contains(".Changed") }, timeLimit: .seconds(30))
            #expect(next.line.contains("/sync/after"), "\(next.line)")
            _ = await monitor.terminate()
            values.stop()
            await store.close()
            _ = postgres
        }
    }

    @Test func concurrentWritesToOneKeyConvergeEverywhere() async throws {
        try await withMachines(["alpha", "beta", "gamma"]) { postgres, machines in
            // When: each machine writes the same key several times, at once.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, machine) in machines.enumerated() {
                    group.addTask {
                        for round in 0..<5 {
                            let result = try await machine.call("Set", ["/sync/shared", "<'m\(index)-\(round)'>"])
                            #expect(result.status == 0, "\(result.stderr)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            // Then: every machine ends with the database's value.
            let winner = try await waitForAgreement(machines, key: "/sync/shared")
            let stored = try await postgres.psql("SELECT value FROM settingsbus_value WHERE key = '/sync/shared'")
            #expect(stored.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == winner.trimmingCharacters(in: CharacterSet(charactersIn: "(<>,)")))
        }
    }

    @Test func ofTwoAppliesOnTwoMachinesOneWinsOnAllTheKeysTheyShare() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            #expect(try await machines[0].call("Set", ["/sync/pair/ready", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/pair/ready")
            // When: with the server away, each machine writes both keys in one Apply (one commit, one version).
            try await postgres.pause()
            for machine in machines {
                let name = machine.name
                let result = try await machine.call(
                    "Apply", ["{'/sync/pair/x': <'\(name)'>, '/sync/pair/y': <'\(name)'>}", "@as []", "@a{sv} {}"])
                #expect(result.status == 0, "\(result.stderr)")
            }
            try await postgres.resume()
            // Then: both machines end with x and y from one and the same machine.
            let x = try await waitForAgreement(machines, key: "/sync/pair/x")
            let y = try await waitForAgreement(machines, key: "/sync/pair/y")
            #expect(x == y)
        }
    }

    /// Another version of an app on A writes a value B's schema refuses: B applies the rest of A's commit,
    /// keeps its own value, and says which change it refused in `Status` until a value it accepts arrives.
    @Test func aRemoteValueThatTheSchemaHereRefusesIsListedInStatusAndTheRestApplies() async throws {
        try await withMachines(["alpha", "beta"]) { _, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await b.call("Register", ["/sync/level", "i", "<0>", "@a{sv} {}"]).status == 0)
            #expect(try await b.call("Set", ["/sync/level", "<2>"]).status == 0)

            // When: A, with no schema for the key, writes a string to it and another key in one commit.
            let apply = try await a.call(
                "Apply", ["{'/sync/level': <'loud'>, '/sync/other': <'ok'>}", "@as []", "@a{sv} {}"])
            #expect(apply.status == 0, "\(apply.stderr)")

            // Then: B has the other key, keeps its level, and lists the refused change.
            try await waitForAgreement(machines, key: "/sync/other", expecting: "(<'ok'>,)")
            #expect(try await b.get("/sync/level") == "(<2>,)")
            var refused = try await statusField(b, "sync-refused")
            let deadline = ContinuousClock.now + .seconds(30)
            while refused == nil, ContinuousClock.now < deadline {
                try await waitForChanged(on: [b], timeLimit: .milliseconds(250))
                refused = try await statusField(b, "sync-refused")
            }
            let text = try #require(refused)
            #expect(text.contains("/sync/level from alpha: "), "\(text)")
            #expect(try await statusField(a, "sync-refused") == nil)

            // When: A writes a value B accepts. Then: B takes it and the refusal is over.
            #expect(try await a.call("Set", ["/sync/level", "<5>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/level", expecting: "(<5>,)")
            #expect(try await statusField(b, "sync-refused") == nil)
        }
    }

    /// With `--sync-poll`, a broker holds no connection between syncs and listens for no hint: a write on A
    /// still reaches B within about the interval, and the server shows no connection older than a sync.
    @Test func pollingBrokersHoldNoConnectionBetweenSyncsAndStillAgree() async throws {
        try await withMachines(["alpha", "beta"], extra: ["--sync-poll", "1"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            for round in 0..<4 {
                // When: A writes. Then: B has it within a few intervals.
                #expect(try await a.call("Set", ["/sync/poll", "<\(round)>"]).status == 0)
                try await waitForAgreement(machines, key: "/sync/poll", expecting: "(<\(round)>,)", timeLimit: .seconds(15))
                // And: the brokers' connections are at most one each, none listening, none older than a sync
                // would keep it (a listening broker holds two from its start on, one of them listening).
                let held = try await postgres.psql(
                    """
                    SELECT count(*), count(*) FILTER (WHERE query ILIKE 'LISTEN%'),
                        coalesce(max(extract(epoch FROM now() - backend_start)), 0) < 3
                    FROM pg_stat_activity WHERE datname = '\(postgres.database)' AND usename = '\(postgres.user)'
                    """)
                let fields = held.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
                #expect(fields.count == 3, "\(held.stdout) \(held.stderr)")
                if fields.count == 3 {
                    #expect((Int(fields[0]) ?? 9) <= 2 && fields[1] == "0" && fields[2] == "t", "round \(round): \(held.stdout)")
                }
            }
            let state = try await statusField(b, "sync-state")
            #expect(state == "<'polling'>" || state == "<'connected'>", "\(String(describing: state))")
        }
    }

    /// A push that was the only change after the machine's cursor moves the cursor itself (the machine takes
    /// no hint from its own push and pulls nothing after it); a push from elsewhere in between is pulled.
    @Test func aMachinesOwnPushMovesItsCursorAndAnotherMachinesPushIsPulled() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            /// Once `writer` pushed all it queued, both cursors reach the database's revision.
            func cursorsReachTheRevision(after writer: Machine) async throws {
                try await waitForStatus(writer, "sync-queued", "<uint64 0>")
                let read = try await postgres.psql("SELECT revision FROM settingsbus_scope WHERE scope = 'default'")
                let revision = "<int64 \(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines))>"
                try await waitForStatus(a, "sync-cursor", revision)
                try await waitForStatus(b, "sync-cursor", revision)
            }
            for round in 1...3 {
                #expect(try await a.call("Set", ["/sync/cursor", "<\(round)>"]).status == 0)
                try await waitForAgreement(machines, key: "/sync/cursor", expecting: "(<\(round)>,)")
            }
            try await cursorsReachTheRevision(after: a)

            #expect(try await b.call("Set", ["/sync/cursor", "<'beta'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/cursor", expecting: "(<'beta'>,)")
            try await cursorsReachTheRevision(after: b)
        }
    }

    /// Between syncs a listening broker waits for a hint: with nothing written for two seconds, the brokers
    /// take a small part of a CPU (a wait that ended at once after each hint once made every broker pull in a
    /// loop, hundreds of times a second, taking all the CPU it could).
    @Test func idleBrokersWaitForAHintInsteadOfPullingInALoop() async throws {
        try await withMachines(["alpha", "beta"]) { _, machines in
            #expect(try await machines[0].call("Set", ["/sync/idle", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/idle", expecting: "(<1>,)")
            let cpuBefore = machines.map { ProcessTimes.read($0.broker.pid)?.ownMilliseconds ?? 0 }
            // Nothing writes: no Changed comes, and the time limit is the quiet time measured.
            try await waitForChanged(on: machines, timeLimit: .seconds(2))
            for (index, machine) in machines.enumerated() {
                let used = (ProcessTimes.read(machine.broker.pid)?.ownMilliseconds ?? 0) - cpuBefore[index]
                #expect(used < 250, "\(machine.name) used \(used) ms of CPU in two quiet seconds")
            }
        }
    }

    /// A push's NOTIFY carries its rows when they fit in a payload; a larger push notifies with its scope
    /// alone and the other machines pull it: both arrive, in order.
    @Test func aChangeTooLargeForANotifyStillArrivesAndSmallOnesAroundIt() async throws {
        try await withMachines(["alpha", "beta"]) { _, machines in
            let big = String(repeating: "x", count: 9_000)
            #expect(try await machines[0].call("Set", ["/sync/size", "<'small'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/size", expecting: "(<'small'>,)")
            #expect(try await machines[0].call("Set", ["/sync/size", "<'\(big)'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/size", expecting: "(<'\(big)'>,)")
            #expect(try await machines[1].call("Set", ["/sync/size", "<'after'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/size", expecting: "(<'after'>,)")
        }
    }

    @Test func secretAndMachineLocalKeysNeverReachTheDatabase() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let a = machines[0]
            #expect(try await a.call("Register", ["/sync/token", "s", "<''>", "{'secret': <true>}"]).status == 0)
            #expect(try await a.call("Register", ["/sync/monitor", "i", "<0>", "{'machine-local': <true>}"]).status == 0)
            #expect(try await a.call("Set", ["/sync/token", "<'hunter2'>"]).status == 0)
            #expect(try await a.call("Set", ["/sync/monitor", "<3>"]).status == 0)
            #expect(try await a.call("Set", ["/sync/visible", "<'yes'>"]).status == 0)
            // The visible key arrives on B: everything A queued before it was pushed.
            _ = try await waitForAgreement(machines, key: "/sync/visible")
            let rows = try await postgres.psql("SELECT key || '=' || value FROM settingsbus_value ORDER BY key")
            #expect(rows.status == 0, "\(rows.stderr)")
            #expect(!rows.stdout.contains("token") && !rows.stdout.contains("hunter2"), "\(rows.stdout)")
            #expect(!rows.stdout.contains("monitor"), "\(rows.stdout)")
            #expect(rows.stdout.contains("/sync/visible='yes'"), "\(rows.stdout)")
        }
    }

    /// A synced key made secret leaves the other machines at once: its registration queues a reset, which
    /// wakes the sync process as a write does (not only at the next periodic sync, 30 s away).
    @Test func aKeyMadeSecretIsResetEverywhereSoon() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await a.call("Set", ["/sync/pin", "<'1234'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/pin", expecting: "(<'1234'>,)")

            #expect(try await a.call("Register", ["/sync/pin", "s", "<''>", "{'secret': <true>}"]).status == 0)
            try await waitForValue(b, key: "/sync/pin", nil, timeLimit: .seconds(10))
            let rows = try await postgres.psql("SELECT key || '=' || value || ' ' || deleted FROM settingsbus_value")
            #expect(!rows.stdout.contains("1234") && rows.stdout.contains("/sync/pin= t"), "\(rows.stdout)")
        }
    }

    /// `sslmode=require` syncs over TLS: the server takes TCP connections only over TLS, A's write reaches B,
    /// and the server shows the brokers' connections encrypted. A broker that does not ask for TLS is refused,
    /// says so in `Status`, and serves its own writes all the same.
    @Test func overTLSAWriteReachesTheOtherMachineAndAPlainConnectionIsRefused() async throws {
        try await withMachines(["alpha", "beta"], tls: true) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await a.call("Set", ["/sync/tls", "<'encrypted'>"]).status == 0)
            #expect(try await waitForAgreement([a, b], key: "/sync/tls") == "(<'encrypted'>,)")
            let encrypted = try await postgres.psql(
                "select count(*) from pg_stat_ssl s join pg_stat_activity a using (pid) "
                    + "where s.ssl and a.usename = 'settingsbus'")
            #expect((Int(encrypted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 2, "\(encrypted.stdout)")

            let bus = try await TestBus.start()
            let stores = try storeFolder()
            defer { try? FileManager.default.removeItem(at: stores) }
            var plain = syncArguments(postgres, name: "plain")
            plain[1] = postgres.url
            let broker = try await TestBroker.start(
                on: bus, storePath: stores.appendingPathComponent("plain.db").path, arguments: plain)
            let machine = Machine(name: "plain", bus: bus, broker: broker)
            try await waitForStatus(machine, "sync-state", "<'error'>")
            let error = try await statusField(machine, "sync-error") ?? ""
            #expect(error.contains("no encryption") || error.contains("pg_hba"), "\(error)")
            #expect(try await machine.call("Set", ["/sync/local", "<1>"]).status == 0)
            await stopMachines([machine])
        }
    }
}

/// A broker standing for a machine: its own bus and store.
struct Machine: Sendable {
    let name: String
    let bus: TestBus
    let broker: TestBroker

    /// `gdbus call` of a method of the broker with GVariant text arguments.
    func call(_ method: String, _ arguments: [String]) async throws -> TestProcess.Result {
        try await TestProcess.run(
            "/usr/bin/gdbus",
            ["call", "--session", "--dest", "io.github.settingsbus.Settings1", "--object-path",
             "/io/github/settingsbus/Settings1", "--method", "io.github.settingsbus.Settings1.\(method)"] + arguments,
            environment: bus.environment, timeLimit: .seconds(30))
    }

    /// The value `Get` answers, as gdbus prints it, or nil when the call fails.
    func get(_ key: String) async throws -> String? {
        let result = try await call("Get", [key])
        return result.status == 0 ? result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : nil
    }
}

/// The arguments that make a broker sync `/sync/` through `postgres` as machine `name`.
/// Over TLS when the server takes nothing else.
func syncArguments(_ postgres: TestPostgres, name: String, extra: [String] = []) -> [String] {
    ["--sync-url", postgres.url + (postgres.tls ? "?sslmode=require" : ""), "--sync-password-file",
     postgres.passwordFile.path, "--sync-dir", "/sync/",
     "--machine-id", "id-\(name)", "--machine-name", name] + extra
}

/// A folder for the tests' stores, which outlive the brokers that a test kills and starts again.
func storeFolder() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-sync-test-\(UUID())")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// Starts a private PostgreSQL server and a broker for each name (its store `<name>.db` in `stores`), runs
/// `body`, and stops them all.
func withMachines(
    _ names: [String], extra: [String] = [], tls: Bool = false, _ body: (TestPostgres, [Machine]) async throws -> Void
) async throws {
    let postgres = try await TestPostgres.start(tls: tls)
    let stores = try storeFolder()
    defer { try? FileManager.default.removeItem(at: stores) }
    var machines: [Machine] = []
    try await stoppingAfterwards(postgres, { machines }) {
        for name in names {
            machines.append(
                try await startMachine(name, stores: stores, arguments: syncArguments(postgres, name: name, extra: extra)))
        }
        try await body(postgres, machines)
    }
}

/// Starts a broker on a bus of its own, with its store `<name>.db` in `stores`; the bus is stopped when the
/// broker does not start.
func startMachine(_ name: String, stores: URL, arguments: [String]) async throws -> Machine {
    let bus = try await TestBus.start()
    do {
        let broker = try await TestBroker.start(
            on: bus, storePath: stores.appendingPathComponent("\(name).db").path, arguments: arguments)
        return Machine(name: name, bus: bus, broker: broker)
    } catch {
        await bus.stop()
        throw error
    }
}

/// Runs `body`, then stops the machines `machines` gives and the server, however it ends (with the brokers'
/// logs printed when it failed).
func stoppingAfterwards(
    _ postgres: TestPostgres, _ machines: () -> [Machine], _ body: () async throws -> Void
) async throws {
    do {
        try await body()
    } catch {
        for machine in machines() { print("log of \(machine.name):\n\(machine.broker.log())") }
        await stopMachines(machines())
        await postgres.stop()
        throw error
    }
    await stopMachines(machines())
    await postgres.stop()
}

func stopMachines(_ machines: [Machine]) async {
    for machine in machines {
        await machine.broker.stop()
        await machine.bus.stop()
    }
}

/// Waits until every machine reads one value of `key` and that value is the database's, and returns it; each
/// machine's `Get` is asked again only after a `Changed` of the key on its bus or a second without one.
@discardableResult
func waitForAgreement(
    _ machines: [Machine], key: String, expecting expected: String? = nil, timeLimit: Duration = .seconds(60)
) async throws -> String {
    let deadline = ContinuousClock.now + timeLimit
    var seen: [String?] = []
    while ContinuousClock.now < deadline {
        seen = try await machines.asyncMap { try await $0.get(key) }
        if let first = seen.first, let first, seen.allSatisfy({ $0 == first }), expected == nil || first == expected {
            return first
        }
        // Wait for the next Changed on any machine's bus (or a short while): the pull is on its way.
        try await waitForChanged(on: machines, timeLimit: .seconds(1))
    }
    throw SyncTestFailure(description: "the machines did not agree on \(key) within \(timeLimit): \(seen)")
}

/// Waits for the next `Changed` signal on any of the machines' buses, or `timeLimit`.
func waitForChanged(on machines: [Machine], timeLimit: Duration) async throws {
    let mailbox = Mailbox<Void>()
    var connections: [DBusConnection] = []
    var tasks: [Task<Void, Never>] = []
    for machine in machines {
        let connection = try await machine.bus.connect()
        connections.append(connection)
        let stream = try await connection.signals(
            matching: MatchRule(interface: "io.github.settingsbus.Settings1", member: "Changed"))
        tasks.append(Task { for await _ in stream { mailbox.push(()) } })
    }
    _ = await mailbox.next(timeLimit: timeLimit)
    for task in tasks { task.cancel() }
    for connection in connections { await connection.close() }
}

extension Sequence {
    /// The results of an asynchronous transform of each element, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async throws -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}

/// A sync test's wait that ran out, with what it saw.
struct SyncTestFailure: Error, CustomStringConvertible {
    var description: String
}
