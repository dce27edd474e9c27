// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
internal import Glibc

/// Sync across machines through a private PostgreSQL server (docs/sync.md): brokers on
/// their own private buses with their own stores stand for machines.
///
/// - A write on A reaching a stream in another process on B, and, in the same writes, on A's own bus.
/// - A machine joining when the database holds ``BenchPlan/firstSyncKeys`` keys: from its start until its
///   cursor reaches the database's revision.
/// - ``BenchPlan/syncMachines`` brokers on one server, listening and then polling: one change until all the
///   others have it; the connections the server holds; the server's CPU time and its transactions and
///   sessions while nothing changes.
extension Bench {
    func measureSync() async throws {
        if let reason = TestPostgres.unavailableReason {
            progress("sync is not measured: \(reason)")
            results.syncMissing = reason
            return
        }
        // Two connections for each listening broker, and room for psql.
        let postgres = try await TestPostgres.start(maxConnections: plan.syncMachines * 2 + 20)
        let folder = root.appendingPathComponent("sync")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var machines: [SyncMachine] = []
        var run = SyncRun(machines: plan.syncMachines, firstSyncKeys: plan.firstSyncKeys)
        do {
            for index in 0..<2 { machines.append(try await startMachine(index, postgres, folder)) }
            progress("sync: a write on A → a stream on A's bus and on B's (\(plan.deliveries) writes)")
            (run.localDelivery, run.syncDelivery) = try await syncDelivery(from: machines[0], to: machines[1])

            progress("sync: a machine joining a database of \(plan.firstSyncKeys) keys")
            run.firstSync = try await firstSync(postgres, folder)

            progress("sync: \(plan.syncMachines) brokers on one server, listening")
            while machines.count < plan.syncMachines {
                machines.append(try await startMachine(machines.count, postgres, folder))
            }
            run.listening = try await scale(machines, postgres, mode: "listening")

            progress("sync: \(plan.syncMachines) brokers on one server, polling every \(plan.syncPollSeconds) s")
            for index in machines.indices {
                machines[index] = try await machines[index].restart(
                    arguments: ["--sync-poll", "\(plan.syncPollSeconds)"])
            }
            run.polling = try await scale(machines, postgres, mode: "polling every \(plan.syncPollSeconds) s")
        } catch {
            for machine in machines { await machine.stop() }
            await postgres.stop()
            throw error
        }
        for machine in machines { await machine.stop() }
        await postgres.stop()
        results.sync = run
    }

    // MARK: - Parts

    /// Subscriber processes on A's bus and on B's, one write at a time on A: each write is timed to each.
    private func syncDelivery(from a: SyncMachine, to b: SyncMachine) async throws -> (Samples, Samples) {
        let key = SettingKey(try SettingPath("/bench/sync/delivery"), default: "")
        try await a.settings.set(key, to: "initial")
        let errorLog = root.appendingPathComponent("sync-subscribers.log").path
        let local = try SharedOutput(errorLog: errorLog)
        let remote = try SharedOutput(errorLog: errorLog)
        do {
            for (output, machine) in [(local, a), (remote, b)] {
                try output.start(
                    benchExecutable, ["--role", "subscriber", "--bus", machine.bus.address, "--key", key.path.rawValue],
                    environment: environment)
            }
            _ = try await local.lines(prefix: "initial ", count: 1)
            _ = try await remote.lines(prefix: "initial ", count: 1, timeLimit: .seconds(60))
            var localSamples = Samples()
            var syncSamples = Samples()
            try await boundedLoop(count: plan.deliveries, seconds: plan.loopSeconds * 2) { index in
                let value = "value-\(index)"
                let start = monotonicNanoseconds()
                try await a.settings.set(key, to: value)
                localSamples.append(Double(try await stamp(of: value, in: local) &- start))
                syncSamples.append(Double(try await stamp(of: value, in: remote) &- start))
            }
            await local.terminateAll()
            await remote.terminateAll()
            return (localSamples, syncSamples)
        } catch {
            await local.terminateAll()
            await remote.terminateAll()
            throw error
        }
    }

    /// The time stamp a subscriber printed with `value`.
    private func stamp(of value: String, in output: SharedOutput) async throws -> UInt64 {
        let line = try await output.lines(prefix: value + " ", count: 1, timeLimit: .seconds(60))[0]
        guard let stamp = line.split(separator: " ").last.flatMap({ UInt64($0) }) else {
            throw BenchFailure("unexpected line from a subscriber: \(line)")
        }
        return stamp
    }

    /// A machine stores the keys (in commits of 1,000) and pushes them; then a new machine starts, and is
    /// timed from its start until its cursor reaches the database's revision and its queue is empty. Both sync
    /// a scope of their own, which the other machines of the run never pull.
    private func firstSync(_ postgres: TestPostgres, _ folder: URL) async throws -> Double {
        let writer = try await startMachine(900, postgres, folder, scope: "first-sync")
        defer { Task { await writer.stop() } }
        var start = 0
        while start < plan.firstSyncKeys {
            var sets: [(key: SettingPath, value: DBusValue)] = []
            for index in start..<min(start + 1000, plan.firstSyncKeys) {
                sets.append((try SettingPath("/bench/sync/first/d\(index / 100)/k\(index)"), .string("value \(index)")))
            }
            _ = try await writer.settings.call(Settings1.ApplyRequest(sets: sets))
            start += 1000
        }
        let revision = try await waitUntilPushed(writer, postgres, scope: "first-sync", keys: plan.firstSyncKeys)
        let began = monotonicNanoseconds()
        let joining = try await startMachine(901, postgres, folder, scope: "first-sync")
        do {
            try await waitForSync(joining, revision: revision, timeLimit: .seconds(300))
            let elapsed = Double(monotonicNanoseconds() - began)
            let tree = try await joining.settings.call(
                Settings1.ReadTreeRequest(directory: try SettingDirectory("/bench/sync/first/")))
            guard tree.values.count == plan.firstSyncKeys else {
                throw BenchFailure("the joining machine has \(tree.values.count) of \(plan.firstSyncKeys) keys")
            }
            await joining.stop()
            return elapsed
        } catch {
            await joining.stop()
            throw error
        }
    }

    /// Waits until the database holds `keys` keys in `scope` (asked every 20 ms); returns its revision then.
    private func waitUntilPushed(
        _ machine: SyncMachine, _ postgres: TestPostgres, scope: String, keys: Int
    ) async throws -> Int64 {
        let deadline = monotonicNanoseconds() + 300_000_000_000
        var seen = ""
        while monotonicNanoseconds() < deadline {
            let read = try await postgres.psql(
                """
                SELECT s.revision, (SELECT count(*) FROM settingsbus_value v WHERE v.scope = s.scope)
                FROM settingsbus_scope s WHERE s.scope = '\(scope)'
                """)
            seen = read.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            let fields = seen.split(separator: "|")
            if fields.count == 2, let revision = Int64(fields[0]), let count = Int(fields[1]), count >= keys {
                return revision
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw BenchFailure("\(machine.name) did not push its \(keys) keys within 300 s (revision|keys: \(seen))")
    }

    /// Waits until `machine`'s cursor has reached `revision` with nothing queued (its `Status`, asked every
    /// 20 ms: a measurement of seconds).
    private func waitForSync(_ machine: SyncMachine, revision: Int64, timeLimit: Duration) async throws {
        let deadline = ContinuousClock.now + timeLimit
        while ContinuousClock.now < deadline {
            let status = try await machine.syncStatus()
            if case .int64(let cursor) = status["sync-cursor"], cursor >= revision, status["sync-queued"] == .uint64(0) {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw BenchFailure("\(machine.name) did not reach revision \(revision) within \(timeLimit)")
    }

    /// The machines on one server: while nothing changes for ``BenchPlan/syncIdleSeconds``, the server's CPU
    /// time, transactions and sessions, and the connections it holds; then ``BenchPlan/syncChanges`` writes
    /// on the first machine, each timed until every other machine's bus announced it.
    private func scale(_ machines: [SyncMachine], _ postgres: TestPostgres, mode: String) async throws -> ScaleRun {
        var run = ScaleRun(mode: mode)
        let arrivals = Mailbox<(machine: Int, value: String, stamp: UInt64)>()
        var watchers: [(DBusConnection, DBusSignalSubscription)] = []
        defer {
            for (connection, subscription) in watchers {
                subscription.end()
                Task { await connection.close() }
            }
        }
        let key = "/bench/sync/scale"
        for (index, machine) in machines.enumerated() {
            let connection = try await machine.bus.connect()
            let subscription = try await connection.forwardSignals(
                matching: MatchRule(interface: SettingsBusNames.interface, member: "Changed")
            ) { message in
                let stamp = monotonicNanoseconds()
                guard let changed = try? Settings1.ChangedSignal(message.body) else { return }
                for (name, value) in changed.values where name == key {
                    if case .string(let text) = value { arrivals.push((index, text, stamp)) }
                }
            }
            watchers.append((connection, subscription))
        }
        // Every machine connected (or polled once) before the quiet time.
        for machine in machines { try await waitForState(machine, mode.hasPrefix("polling") ? "polling" : "connected") }

        // A server process reports its statistics up to 10 s after its last transaction: the start's
        // transactions are counted before the quiet time begins.
        try await Task.sleep(for: .seconds(plan.syncIdleSeconds > 10 ? 11 : 1))
        let before = try await ServerLoad.read(postgres)
        var connections = 0
        let quietEnd = monotonicNanoseconds() + UInt64(plan.syncIdleSeconds * 1e9)
        while monotonicNanoseconds() < quietEnd {
            // Every 2 s: each look is a psql session, whose own CPU time the server's count includes.
            connections = max(connections, try await ServerLoad.connections(postgres))
            try await Task.sleep(for: .seconds(2))
        }
        // The quiet time's transactions are reported up to 10 s after it.
        try await Task.sleep(for: .seconds(plan.syncIdleSeconds > 10 ? 11 : 1))
        let after = try await ServerLoad.read(postgres)
        run.idle = after.minus(before, seconds: plan.syncIdleSeconds + (plan.syncIdleSeconds > 10 ? 11 : 1))

        let writer = machines[0]
        for change in 0..<plan.syncChanges {
            let value = "\(mode)-\(change)"
            let start = monotonicNanoseconds()
            try await writer.settings.set(SettingKey(try SettingPath(key), default: ""), to: value)
            var seen: Set<Int> = [0]
            var last = start
            while seen.count < machines.count {
                let limit = Duration.seconds(Int64(plan.syncPollSeconds) * 4 + 60)
                guard case .element(let arrival) = await arrivals.next(timeLimit: limit) else {
                    throw BenchFailure("\(machines.count - seen.count) machines did not have \(value) within \(limit)")
                }
                guard arrival.value == value else { continue }
                seen.insert(arrival.machine)
                last = max(last, arrival.stamp)
                if seen.count % 8 == 0 { connections = max(connections, try await ServerLoad.connections(postgres)) }
            }
            run.reachAll.append(Double(last &- start))
        }
        run.mostConnections = connections
        return run
    }

    private func waitForState(_ machine: SyncMachine, _ state: String) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if try await machine.syncStatus()["sync-state"] == .string(state) { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BenchFailure("\(machine.name) is not \(state) after 120 s: \(try await machine.syncStatus())")
    }

    // MARK: - Machines

    private func startMachine(
        _ index: Int, _ postgres: TestPostgres, _ folder: URL, scope: String = "default"
    ) async throws -> SyncMachine {
        let bus = try await TestBus.start(environment: environment.filter { !$0.key.hasPrefix("DBUS_") })
        let arguments = [
            "--sync-url", postgres.url, "--sync-password-file", postgres.passwordFile.path, "--sync-dir",
            "/bench/sync/", "--machine-id", "bench-machine-\(index)", "--machine-name", "m\(index)", "--sync-scope", scope,
        ]
        do {
            let storePath = folder.appendingPathComponent("m\(index).db").path
            let broker = try await TestBroker.start(on: bus, storePath: storePath, arguments: arguments)
            return SyncMachine(
                name: "m\(index)", bus: bus, broker: broker, storePath: storePath, arguments: arguments,
                settings: BusSettingsStore(bus: .address(bus.address)))
        } catch {
            await bus.stop()
            throw error
        }
    }
}

/// A broker on its own bus with its own store: a machine.
struct SyncMachine: Sendable {
    let name: String
    let bus: TestBus
    let broker: TestBroker
    let storePath: String
    let arguments: [String]
    let settings: BusSettingsStore

    /// The sync fields of the broker's `Status`.
    func syncStatus() async throws -> [String: DBusValue] {
        try await settings.call(Settings1.StatusRequest()).fields.filter { $0.key.hasPrefix("sync-") }
    }

    /// Stops the broker and starts it again on the same store, with `arguments` added.
    func restart(arguments extra: [String]) async throws -> SyncMachine {
        _ = await broker.stop()
        let broker = try await TestBroker.start(on: bus, storePath: storePath, arguments: arguments + extra)
        return SyncMachine(
            name: name, bus: bus, broker: broker, storePath: storePath, arguments: arguments, settings: settings)
    }

    func stop() async {
        await settings.close()
        _ = await broker.stop()
        await bus.stop()
    }
}

/// The server's load, read from `/proc` and its statistics views.
struct ServerLoad: Sendable {
    /// CPU time of the server and all its processes, ended ones included, in milliseconds.
    var cpuMilliseconds: Double
    /// Transactions committed and sessions begun in the benchmark's database.
    var transactions: Int
    var sessions: Int
    /// The time sessions of the benchmark's database lasted, ended ones (`session_time`), in milliseconds.
    var sessionMilliseconds: Double

    static func read(_ postgres: TestPostgres) async throws -> ServerLoad {
        // Read from the database `postgres`, so that these sessions are not counted in the brokers' one.
        let statistics = try await postgres.psql(
            "SELECT xact_commit, sessions, session_time FROM pg_stat_database WHERE datname = '\(postgres.database)'",
            database: "postgres")
        let fields = statistics.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
        guard fields.count == 3, let transactions = Int(fields[0]), let sessions = Int(fields[1]),
            let sessionTime = Double(fields[2])
        else {
            throw BenchFailure("cannot read the server's statistics: \(statistics.stdout)\(statistics.stderr)")
        }
        guard let pid = postgres.serverPid else { throw BenchFailure("the server's pid cannot be read") }
        return ServerLoad(
            cpuMilliseconds: cpuMilliseconds(of: pid), transactions: transactions, sessions: sessions,
            sessionMilliseconds: sessionTime)
    }

    /// The connections the server holds for the brokers (psql's own left out).
    static func connections(_ postgres: TestPostgres) async throws -> Int {
        let read = try await postgres.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = '\(postgres.user)'", database: "postgres")
        return Int(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// The server's CPU time: its own, its ended children's (reaped: `cutime`, `cstime`) and its running
    /// children's, from `/proc`.
    static func cpuMilliseconds(of server: Int32) -> Double {
        var total = ProcessTimes.read(server).map { $0.ownMilliseconds + $0.endedChildrenMilliseconds } ?? 0
        for pid in ProcessTimes.runningPids() {
            if let child = ProcessTimes.read(pid), child.parent == server { total += child.ownMilliseconds }
        }
        return total
    }

    /// The load between two readings, per minute.
    func minus(_ earlier: ServerLoad, seconds: Double) -> IdleLoad {
        let perMinute = 60 / seconds
        return IdleLoad(
            cpuMillisecondsPerMinute: (cpuMilliseconds - earlier.cpuMilliseconds) * perMinute,
            transactionsPerMinute: Double(transactions - earlier.transactions) * perMinute,
            sessionsPerMinute: Double(sessions - earlier.sessions) * perMinute,
            meanSessionMilliseconds: sessions > earlier.sessions
                ? (sessionMilliseconds - earlier.sessionMilliseconds) / Double(sessions - earlier.sessions) : nil)
    }
}
