// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import Logging
import SettingsBus
import SettingsBusTesting
import SettingsModel
@testable import SettingsSync
import SyncProtocol
import Testing
import TestMachine

/// The database is a boundary a broker does not trust: rows written by hand or by a broken machine, and
/// NOTIFYs from any role that can connect, are refused and listed (`sync-refused`), never a broker that dies,
/// a key frozen, a cursor stuck or a change lost.
@Suite(
    .sharingTheMachine,
    .timeLimit(.minutes(10)),
    .enabled(if: TestPostgres.unavailableReason == nil, "\(TestPostgres.unavailableReason ?? "")"))
struct SyncHostileDatabaseTests {
    /// A clock of -1 was read as 2^64 − 1 (and the next local write trapped); a clock of 2^63 − 1 made its
    /// key unchangeable everywhere and wrapped the clocks of the machines that took it.
    @Test func remoteClocksOutOfBoundsAreRefusedAndNeitherTrapNorFreezeAKey() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await a.call("Set", ["/sync/ready", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ready")

            // When: rows with clocks no broker pushes are written by hand.
            try await forgeRow(postgres, key: "/sync/negative", value: "'forged'", hlc: "-1")
            try await forgeRow(postgres, key: "/sync/largest", value: "'forged'", hlc: "9223372036854775807")

            // Then: both are refused and listed, and the machines write on as before.
            let refused = try await waitForRefusal(b, containing: ["/sync/negative", "/sync/largest"])
            #expect(refused.contains("negative") && refused.contains("ahead"), "\(refused)")
            #expect(try await b.call("Set", ["/sync/after", "<'beta'>"]).status == 0)
            #expect(try await b.get("/sync/negative") == nil)
            // The key is not frozen: a real write replaces the forged row everywhere.
            #expect(try await a.call("Set", ["/sync/largest", "<'real'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/largest", expecting: "(<'real'>,)", timeLimit: .seconds(45))
            // And: the clocks did not wrap: of two writes, the later wins.
            #expect(try await a.call("Set", ["/sync/order", "<'first'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/order", expecting: "(<'first'>,)")
            #expect(try await b.call("Set", ["/sync/order", "<'second'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/order", expecting: "(<'second'>,)")
        }
    }

    /// A machine takes a remote change only where it would push the key itself.
    @Test func aRemoteRowOutsideThisMachinesSyncSettingsIsRefusedAndListed() async throws {
        let postgres = try await TestPostgres.start()
        let stores = try storeFolder()
        defer { try? FileManager.default.removeItem(at: stores) }
        var machines: [Machine] = []
        try await stoppingAfterwards(postgres, { machines }) {
            // Given: alpha syncs /sync/ and /other/ and has no schemas; beta syncs /sync/ only, with a secret
            // key and a machine-local key of its own.
            machines.append(
                try await startMachine(
                    "alpha", stores: stores, arguments: syncArguments(postgres, name: "alpha", extra: ["--sync-dir", "/other/"])))
            machines.append(try await startMachine("beta", stores: stores, arguments: syncArguments(postgres, name: "beta")))
            let (a, b) = (machines[0], machines[1])
            #expect(try await b.call("Register", ["/sync/token", "s", "<''>", "{'secret': <true>}"]).status == 0)
            #expect(try await b.call("Register", ["/sync/monitor", "i", "<0>", "{'machine-local': <true>}"]).status == 0)
            #expect(try await b.call("Set", ["/sync/token", "<'mine'>"]).status == 0)
            #expect(try await b.call("Set", ["/sync/monitor", "<1>"]).status == 0)

            // When: alpha writes all three, then a key both sync.
            for (key, value) in [("/other/x", "<'alpha'>"), ("/sync/token", "<'alpha'>"), ("/sync/monitor", "<9>")] {
                #expect(try await a.call("Set", [key, value]).status == 0)
            }
            #expect(try await a.call("Set", ["/sync/visible", "<'yes'>"]).status == 0)

            // Then: beta has the last one only, keeps its own values, and lists the refused changes.
            try await waitForAgreement(machines, key: "/sync/visible", expecting: "(<'yes'>,)")
            #expect(try await b.get("/other/x") == nil)
            #expect(try await b.get("/sync/monitor") == "(<1>,)")
            let token = try await b.call("Get", ["/sync/token"])
            #expect(!token.stdout.contains("alpha"), "\(token.stdout)")
            let refused = try await waitForRefusal(b, containing: ["/other/x", "/sync/token", "/sync/monitor"])
            #expect(refused.contains("outside") && refused.contains("secret") && refused.contains("machine-local"), "\(refused)")
        }
    }

    /// A NOTIFY's payload is not data: a role with no privilege on the tables sends rows for the next
    /// revision; the broker serves none of it and still takes the real next push.
    @Test func aForgedNotifyIsNeitherServedNorMovesTheCursor() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await a.call("Set", ["/sync/ready", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ready")
            try await waitForStatus(b, "sync-queued", "<uint64 0>")
            let cursorText = try #require(try await statusField(b, "sync-cursor"))
            // `<int64 5>`
            let cursor = try #require(Int64(cursorText.dropFirst("<int64 ".count).dropLast()))
            let lastSync = try await statusField(b, "sync-last")

            // When: a role with no privilege on the tables notifies rows for the next revision.
            let clock = (Int64(Date().timeIntervalSince1970 * 1000) << 16)
            let payload =
                #"{"s": "default", "r": \#(cursor + 1), "n": "alpha", "k": [["/sync/forged", "s", "'evil'", false, "\#(clock)", "id-alpha"]]}"#
            let sent = try await postgres.psql(
                "CREATE ROLE intruder; SET ROLE intruder; "
                    + "SELECT pg_notify('settingsbus', '\(payload.replacingOccurrences(of: "'", with: "''"))')")
            #expect(sent.status == 0, "\(sent.stderr)")
            // The hint woke beta (it synced again).
            try await waitForStatusChange(b, "sync-last", from: lastSync)

            // Then: the real next push arrives, and the forged value is nowhere.
            #expect(try await a.call("Set", ["/sync/real", "<'yes'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/real", expecting: "(<'yes'>,)", timeLimit: .seconds(45))
            #expect(try await b.get("/sync/forged") == nil)
        }
    }

    /// More rows than a page that cannot be read: the cursor moves past them, and they are listed.
    @Test func moreUnreadableRowsThanAPageMoveTheCursorAndAreListed() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await a.call("Set", ["/sync/ready", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ready")

            // When: 2,100 rows whose keys are not keys are written by hand, in one revision.
            let made = try await postgres.psql(
                """
                WITH rev AS (UPDATE settingsbus_scope SET revision = revision + 1 WHERE scope = 'default'
                    RETURNING revision)
                INSERT INTO settingsbus_value (scope, key, type, value, deleted, hlc, machine, revision)
                SELECT 'default', '/sync/bad key ' || g, 's', '''x''', false, 1, 'id-forger', revision
                FROM rev, generate_series(1, 2100) AS g;
                NOTIFY settingsbus, 'default';
                """)
            #expect(made.status == 0, "\(made.stderr)")

            // Then: a later write still arrives, and the refused rows are listed (at most 20).
            #expect(try await a.call("Set", ["/sync/after", "<'yes'>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/after", expecting: "(<'yes'>,)", timeLimit: .seconds(45))
            let refused = try await waitForRefusal(b, containing: ["/sync/bad key"])
            #expect(refused.components(separatedBy: " from id-forger: ").count - 1 == 20, "\(refused)")
        }
    }

    /// One revision of 200,000 rows, written by hand in one INSERT: a pull reads it in pages within the
    /// revision (its cursor is a revision and a key), each page well within a statement's time bound, and a
    /// later write of the other machine arrives after it.
    @Test func aRevisionOfTwoHundredThousandRowsIsPulledInPagesAndALaterWriteArrives() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await a.call("Set", ["/sync/ready", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ready")

            // When: 200,000 rows are written in one revision, then alpha writes a key.
            let made = try await postgres.psql(
                """
                WITH rev AS (UPDATE settingsbus_scope SET revision = revision + 1 WHERE scope = 'default'
                    RETURNING revision)
                INSERT INTO settingsbus_value (scope, key, type, value, deleted, hlc, machine, revision)
                SELECT 'default', '/sync/bulk/k' || g, 'i', g::text, false,
                    (extract(epoch FROM now()) * 1000)::bigint << 16, 'id-forger', revision
                FROM rev, generate_series(1, 200000) AS g;
                NOTIFY settingsbus, 'default';
                """)
            #expect(made.status == 0, "\(made.stderr)")
            let written = ContinuousClock.now
            #expect(try await a.call("Set", ["/sync/after", "<'yes'>"]).status == 0)

            // Then: beta has alpha's write, and the whole revision.
            try await waitForValue(b, key: "/sync/after", "(<'yes'>,)", timeLimit: .seconds(150))
            print("a write after a revision of 200,000 rows arrived \(ContinuousClock.now - written) after it")
            #expect(try await b.get("/sync/bulk/k1") == "(<1>,)")
            #expect(try await b.get("/sync/bulk/k200000") == "(<200000>,)")
            #expect(try await statusField(b, "sync-error") == nil)
        }
    }

    /// A sync that connects and then fails again and again (here its push waits for a table another session
    /// holds locked, past the statement's bound) shows why in `Status` while it is connected: the last error
    /// stays until a whole push and pull went well.
    @Test func aSyncThatConnectsAndFailsAgainShowsItsErrorWhileConnected() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await a.call("Set", ["/sync/ready", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ready")
            let psql = postgres.binaries.appendingPathComponent("psql").path
            let locker = try RunningProcess.start(
                FileManager.default.isExecutableFile(atPath: psql) ? psql : "/usr/bin/psql",
                ["-X", "-At", "-h", postgres.socketDirectory.path, "-p", "\(postgres.port)", "-U", "postgres", "-d",
                 postgres.database])
            locker.write("BEGIN; LOCK TABLE settingsbus_value IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
            #expect(try await locker.line(where: { $0 == "locked" }).line == "locked")

            // When: beta writes while the table is locked.
            #expect(try await b.call("Set", ["/sync/stalled", "<1>"]).status == 0)

            // Then: while a later session is connected and its push waits, Status names the last error.
            let deadline = ContinuousClock.now + .seconds(30)
            var status = ""
            while ContinuousClock.now < deadline {
                status = try await b.call("Status", []).stdout
                if status.contains("'sync-state': <'connected'>") && status.contains("did not answer within") { break }
                try await waitForChanged(on: [b], timeLimit: .milliseconds(100))
            }
            #expect(
                status.contains("'sync-state': <'connected'>") && status.contains("did not answer within"),
                "no Status of beta was connected with the error: \(status)")

            // And: once the table is free, the write arrives and the error is gone.
            locker.write("COMMIT;\n")
            locker.closeInput()
            #expect(await locker.waitForExit() == 0)
            try await waitForAgreement(machines, key: "/sync/stalled", expecting: "(<1>,)", timeLimit: .seconds(60))
            let cleared = ContinuousClock.now + .seconds(30)
            while try await statusField(b, "sync-error") != nil, ContinuousClock.now < cleared {
                try await waitForChanged(on: [b], timeLimit: .milliseconds(250))
            }
            #expect(try await statusField(b, "sync-error") == nil)
        }
    }

    /// docs/sync.md: a remote value of a key locked here is kept as the user value and served once the lock is
    /// lifted, as a local one would be.
    @Test func aRemoteValueOfALockedKeyIsKeptAndServedOnceTheLockIsLifted() async throws {
        let postgres = try await TestPostgres.start()
        let stores = try storeFolder()
        defer { try? FileManager.default.removeItem(at: stores) }
        let admin = stores.appendingPathComponent("admin")
        for folder in ["locks.d", "defaults.d"] {
            try FileManager.default.createDirectory(
                at: admin.appendingPathComponent(folder), withIntermediateDirectories: true)
        }
        try "[sync]\nlocked='administrator'\n".write(
            to: admin.appendingPathComponent("defaults.d/site.conf"), atomically: true, encoding: .utf8)
        let lock = admin.appendingPathComponent("locks.d/site")
        try "/sync/locked\n".write(to: lock, atomically: true, encoding: .utf8)
        var machines: [Machine] = []
        try await stoppingAfterwards(postgres, { machines }) {
            machines.append(try await startMachine("alpha", stores: stores, arguments: syncArguments(postgres, name: "alpha")))
            machines.append(
                try await startMachine(
                    "beta", stores: stores, arguments: syncArguments(postgres, name: "beta", extra: ["--admin-dir", admin.path])))
            let (a, b) = (machines[0], machines[1])
            #expect(try await b.get("/sync/locked") == "(<'administrator'>,)")

            // When: alpha writes the key, then another one.
            #expect(try await a.call("Set", ["/sync/locked", "<'remote'>"]).status == 0)
            #expect(try await a.call("Set", ["/sync/after", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/after", expecting: "(<1>,)")

            // Then: the lock holds, nothing is refused, and once it is lifted beta serves alpha's value.
            #expect(try await b.get("/sync/locked") == "(<'administrator'>,)")
            #expect(try await statusField(b, "sync-refused") == nil)
            try FileManager.default.removeItem(at: lock)
            try await waitForValue(b, key: "/sync/locked", "(<'remote'>,)", timeLimit: .seconds(20))
        }
    }

    /// A value far larger than any value is refused by its length, without fetching it: the broker's memory
    /// does not grow by the value's size.
    @Test func aHugeRemoteValueIsRefusedByItsLengthWithoutFetchingIt() async throws {
        try await withMachines(["alpha", "beta"]) { postgres, machines in
            let (a, b) = (machines[0], machines[1])
            #expect(try await a.call("Set", ["/sync/ready", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/ready")
            let peakBefore = peakMemoryKiB(b.broker.pid)

            // When: a row of 100 MB is written by hand.
            try await forgeRow(postgres, key: "/sync/huge", value: "'''' || repeat('x', 100000000) || ''''", hlc: nil)

            // Then: it is refused by its length, and the broker's peak memory grew by far less than that.
            let started = ContinuousClock.now
            let refused = try await waitForRefusal(b, containing: ["/sync/huge"])
            let took = ContinuousClock.now - started
            #expect(refused.contains("100000002 bytes"), "\(refused)")
            let grown = peakMemoryKiB(b.broker.pid) - peakBefore
            print("a 100 MB remote value refused \(took) after it was written; peak memory +\(grown / 1024) MiB")
            #expect(grown < 64 * 1024, "peak memory grew by \(grown) KiB")
            #expect(try await b.get("/sync/huge") == nil)
            // And: sync goes on.
            #expect(try await a.call("Set", ["/sync/after", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/after", expecting: "(<1>,)")
        }
    }
}

/// A network cut, not a stopped server: the connections go silent. A machine that wrote while cut off is in
/// step with the others within seconds of the network coming back, not after the 20 s limit of a round trip.
@Suite(
    .aloneOnTheMachine,
    .serialized, .timeLimit(.minutes(5)),
    .enabled(if: TestPostgres.unavailableReason == nil, "\(TestPostgres.unavailableReason ?? "")"))
struct SyncNetworkCutTests {
    @Test func aMachineBackFromANetworkCutIsInStepWithinSeconds() async throws {
        try await withGammaBehindAProxy { _, proxy, machines in
            let gamma = machines[1]
            // When: the network is cut; gamma makes 1,000 writes, which it cannot push.
            try await proxy.cut()
            let store = BusSettingsStore(bus: .address(gamma.bus.address))
            try await store.transaction { transaction in
                for index in 0..<1000 {
                    try transaction.set(SettingKey<Int32>(try SettingPath("/sync/cut/k\(index)"), default: 0), to: Int32(index))
                }
            }
            await store.close()
            try await waitForStatus(gamma, "sync-queued", "<uint64 1000>")

            // Then: once the network is back, both machines agree within seconds (gamma's connection of
            // before the cut stays silent).
            let healed = ContinuousClock.now
            try await proxy.heal()
            try await waitForIdenticalTrees(machines, directory: "/sync/cut/", keys: 1000, timeLimit: .seconds(30))
            let took = ContinuousClock.now - healed
            print("identical contents \(took) after the network came back")
            #expect(took < .seconds(3), "\(took)")
        }
    }

    /// A value written while cut off and then made secret never reaches the database: the registration drops
    /// its queued change, and what the sync process pushes once the network is back is what the queue holds.
    @Test func aValueWrittenWhileCutOffAndThenMadeSecretNeverReachesTheDatabase() async throws {
        try await withGammaBehindAProxy { postgres, proxy, machines in
            let gamma = machines[1]
            // Given: gamma is cut off and knows it.
            try await proxy.cut()
            #expect(try await gamma.call("Set", ["/sync/first", "<1>"]).status == 0)
            try await waitForStatus(gamma, "sync-state", "<'offline'>")

            // When: it writes a value, and the key is then registered secret.
            #expect(try await gamma.call("Set", ["/sync/token", "<'hunter2'>"]).status == 0)
            #expect(try await gamma.call("Register", ["/sync/token", "s", "<''>", "{'secret': <true>}"]).status == 0)
            try await proxy.heal()

            // Then: what it wrote before arrives, the secret value never.
            #expect(try await gamma.call("Set", ["/sync/after", "<1>"]).status == 0)
            try await waitForAgreement(machines, key: "/sync/after", expecting: "(<1>,)", timeLimit: .seconds(60))
            try await waitForAgreement(machines, key: "/sync/first", expecting: "(<1>,)")
            // (A reset of the key may be there: its value had a version here, so it might have been pushed.)
            let rows = try await postgres.psql(
                "SELECT key || '=' || value || ' ' || deleted FROM settingsbus_value ORDER BY key")
            #expect(rows.status == 0, "\(rows.stderr)")
            #expect(!rows.stdout.contains("hunter2"), "\(rows.stdout)")
            let token = rows.stdout.split(separator: "\n").filter { $0.contains("/sync/token") }
            #expect(token.allSatisfy { $0.hasSuffix("= true") }, "\(rows.stdout)")
        }
    }
}

/// Runs `body` with alpha reaching the server directly and gamma through a ``TestProxy``, both connected (a
/// first write of gamma's has reached alpha); stops them and the server afterwards.
private func withGammaBehindAProxy(
    _ body: (TestPostgres, TestProxy, [Machine]) async throws -> Void
) async throws {
    let postgres = try await TestPostgres.start()
    let proxy = try await TestProxy.start(to: postgres.port)
    let stores = try storeFolder()
    defer { try? FileManager.default.removeItem(at: stores) }
    var machines: [Machine] = []
    try await stoppingAfterwards(postgres, { machines }) {
        defer { Task { await proxy.stop() } }
        machines.append(try await startMachine("alpha", stores: stores, arguments: syncArguments(postgres, name: "alpha")))
        var through = syncArguments(postgres, name: "gamma")
        through[1] = "postgres://\(postgres.user)@127.0.0.1:\(proxy.port)/\(postgres.database)"
        machines.append(try await startMachine("gamma", stores: stores, arguments: through))
        #expect(try await machines[1].call("Set", ["/sync/start", "<1>"]).status == 0)
        try await waitForAgreement(machines, key: "/sync/start")
        try await body(postgres, proxy, machines)
    }
}

/// No error message of sync carries a URL's password.
@Suite(.sharingTheMachine) struct SyncPasswordTests {
    @Test(arguments: [
        "postgress://me:PW-secret@db.example/settings", "postgres://me:PW-secret@db.example/settings",
        "postgresql://me:PW-secret", "http://me:PW-secret@db.example", "postgres://me@db.example:PW-secret/settings",
        "postgres://me@db.example/settings?password=PW-secret", "postgres://me:PW-secret@db.example:5x/settings",
        "PW-secret", "postgres://me:PW%2Dsecret@db.example/settings",
    ])
    func aURLsPasswordIsInNoErrorMessage(url: String) throws {
        do throws(SyncConfigurationError) {
            _ = try DatabaseAddress(url: url)
            Issue.record("\(url) was accepted")
        } catch {
            #expect(!error.description.contains("PW-secret") && !error.description.contains("PW%2Dsecret"), "\(error.description)")
            #expect(error.description.contains("--sync-url"), "\(error.description)")
        }
    }

    @Test func theBrokerDoesNotPrintAMistypedURLsPassword() async throws {
        let stores = try storeFolder()
        defer { try? FileManager.default.removeItem(at: stores) }
        let run = try await TestProcess.run(
            try TestBroker.executablePath(),
            ["--store", stores.appendingPathComponent("s.db").path, "--sync-url", "postgress://me:PW-secret@db.example/settings",
             "--sync-dir", "/sync/"])
        #expect(run.status != 0)
        #expect(run.stderr.contains("--sync-url"), "\(run.stderr)")
        #expect(!run.stdout.contains("PW-secret") && !run.stderr.contains("PW-secret"), "\(run.stderr)")
    }

    @Test func theEnginesErrorTextsCarryNoPassword() throws {
        let address = try DatabaseAddress(url: "postgres://me@db.example/settings")
        let engine = SyncEngine(
            configuration: SyncConfiguration(
                database: address, passwordFile: nil, directories: [try SettingDirectory("/sync/")], machineID: "m",
                machineName: "m"),
            logger: .init(label: "test"), environment: [:], broker: BrokerLink(channel: try unusedChannel()))
        engine.notePassword("PW-secret")
        struct Echo: Error, CustomStringConvertible {
            var description: String { "could not connect with password PW-secret to postgres://me:PW-secret@db" }
        }
        let (_, text) = engine.describe(Echo())
        #expect(!text.contains("PW-secret"), "\(text)")
    }
}

/// One end of a socket pair whose other end is closed: a channel for an engine whose broker is not called.
func unusedChannel() throws -> MessageChannel {
    var pair: [Int32] = [-1, -1]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { throw POSIXError(.EMFILE) }
    close(pair[1])
    return MessageChannel(descriptor: pair[0], label: "test")
}

/// Writes a row into the database by hand, as a push would (the scope's revision bumped) but with the clock
/// given (`hlc`, SQL; nil: the database's now), then NOTIFYs.
func forgeRow(_ postgres: TestPostgres, key: String, type: String = "s", value: String, hlc: String?) async throws {
    let clock = hlc ?? "(extract(epoch FROM now()) * 1000)::bigint << 16"
    let made = try await postgres.psql(
        """
        WITH rev AS (UPDATE settingsbus_scope SET revision = revision + 1 WHERE scope = 'default' RETURNING revision)
        INSERT INTO settingsbus_value AS old (scope, key, type, value, deleted, hlc, machine, revision)
        SELECT 'default', '\(key)', '\(type)', \(value), false, \(clock), 'id-forger', revision FROM rev
        ON CONFLICT (scope, key) DO UPDATE SET type = excluded.type, value = excluded.value, deleted = false,
            hlc = excluded.hlc, machine = excluded.machine, revision = excluded.revision;
        NOTIFY settingsbus, 'default';
        """)
    #expect(made.status == 0, "\(made.stderr)")
}

/// Waits until a machine's `sync-refused` names every one of `keys`, and returns it.
@discardableResult
func waitForRefusal(_ machine: Machine, containing keys: [String], timeLimit: Duration = .seconds(45)) async throws -> String {
    let deadline = ContinuousClock.now + timeLimit
    var seen: String?
    while ContinuousClock.now < deadline {
        seen = try await statusField(machine, "sync-refused")
        if let seen, keys.allSatisfy({ seen.contains($0) }) { return seen }
        try await waitForChanged(on: [machine], timeLimit: .milliseconds(250))
    }
    throw SyncTestFailure(description: "sync-refused of \(machine.name) did not name \(keys): \(String(describing: seen))")
}

/// Waits until a field of a machine's `Status` reads other than `old`.
func waitForStatusChange(_ machine: Machine, _ name: String, from old: String?, timeLimit: Duration = .seconds(20)) async throws {
    let deadline = ContinuousClock.now + timeLimit
    while ContinuousClock.now < deadline {
        if try await statusField(machine, name) != old { return }
        try await waitForChanged(on: [machine], timeLimit: .milliseconds(100))
    }
    throw SyncTestFailure(description: "\(name) of \(machine.name) stayed \(String(describing: old))")
}

/// Waits until a machine's `Get` of a key reads `expected` (nil: the key has no value).
func waitForValue(_ machine: Machine, key: String, _ expected: String?, timeLimit: Duration) async throws {
    let deadline = ContinuousClock.now + timeLimit
    var seen: String?
    while ContinuousClock.now < deadline {
        seen = try await machine.get(key)
        if seen == expected { return }
        try await waitForChanged(on: [machine], timeLimit: .milliseconds(250))
    }
    throw SyncTestFailure(
        description: "\(key) of \(machine.name) read \(String(describing: seen)), not \(String(describing: expected))")
}

/// The peak resident memory of a process (`VmHWM`), in KiB.
func peakMemoryKiB(_ pid: Int32) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}
