// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The broker is killed with SIGKILL at random moments while python3-dbus writers set keys as fast as they
/// can, and while it copies its backup (every 50 ms here). After every restart each acknowledged write is
/// there with its value, the store opened without repair, the backup is a sound store, and the serial did
/// not go back.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct CrashRecoveryTests {
    static let rounds = 40
    /// Backups as often as commits allow, so that kills also land in the middle of one.
    static let brokerArguments = ["--backup-interval", "0.05"]
    static let writerCount = 3
    /// Keys per writer: value v goes to key k<v % keysPerWriter>.
    static let keysPerWriter = 5

    /// One writer process and what it has had acknowledged.
    final class Writer {
        let index: Int
        let process: RunningProcess
        /// The latest acknowledged value of each of its keys.
        var acknowledged: [String: Int64] = [:]
        /// The latest acknowledged value overall (values are acknowledged in order: 1, 2, 3, ...).
        var lastValue: Int64 = 0
        var highestSerial: UInt64 = 0
        var total = 0

        init(index: Int, process: RunningProcess) {
            self.index = index
            self.process = process
        }

        var prefix: String { "/test/crash/w\(index)" }

        func key(of value: Int64) -> String { "\(prefix)/k\(value % Int64(CrashRecoveryTests.keysPerWriter))" }

        /// Reads its lines until it prints an acknowledgement (or a failure, when `untilFailure`).
        func read(untilFailure: Bool) async throws {
            while true {
                guard let line = try await process.nextLine(timeLimit: .seconds(20)) else {
                    throw TestFailure("writer \(index) ended: \(await process.standardError())")
                }
                let fields = line.split(separator: " ")
                if fields.first == "ack", fields.count == 4, let value = Int64(fields[2]), let serial = UInt64(fields[3]) {
                    #expect(value == lastValue + 1, "writer \(index): acknowledged \(value) after \(lastValue)")
                    acknowledged[String(fields[1])] = value
                    lastValue = value
                    highestSerial = max(highestSerial, serial)
                    total += 1
                    if !untilFailure { return }
                } else if fields.first == "fail" {
                    if untilFailure { return }
                } else {
                    Issue.record("writer \(index) printed: \(line)")
                }
            }
        }
    }

    /// `PRAGMA quick_check` of a store file, with python3's sqlite3, read-only.
    static func integrity(of path: String) async throws -> String {
        let result = try await TestProcess.run(
            PeerScripts.python,
            ["-c", "import sqlite3,sys; print(sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True).execute('PRAGMA quick_check').fetchone()[0])", path])
        return result.status == 0 ? result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) : result.stderr
    }

    @Test func everyAcknowledgedWriteSurvivesSIGKILLAtRandomMoments() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus, storePath: directory.store, arguments: Self.brokerArguments)
            let writers = try (0..<Self.writerCount).map { index in
                Writer(
                    index: index,
                    process: try RunningProcess.start(
                        PeerScripts.python,
                        [PeerScripts.path("settings_writer.py"), "/test/crash/w\(index)", "\(Self.keysPerWriter)"],
                        environment: bus.environment))
            }
            let checker = try await bus.connect()
            let calls = Broker(connection: checker)
            var lastSerial: UInt64 = 0
            let started = ContinuousClock.now

            for round in 1...Self.rounds {
                // Given: every writer has had a write acknowledged by this broker.
                for writer in writers { try await writer.read(untilFailure: false) }

                // When: the broker is killed at a random moment while the writers go on, and each writer has
                // seen it gone (so every acknowledgement it got has been read); then they are frozen.
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...120)))
                #expect(await broker.kill() == 137, "round \(round): the broker had exited before SIGKILL")
                for writer in writers { try await writer.read(untilFailure: true) }
                for writer in writers { writer.process.child.signal(SIGSTOP) }
                broker = try await TestBroker.start(on: bus, storePath: directory.store, arguments: Self.brokerArguments)

                // Then: the store opened without repair, the serial did not go back, and every key holds its
                // last acknowledged value, or the one write that was in flight when the broker died.
                let status = try await calls.status()
                #expect(status["health"] == .string("ok"), "round \(round): \(status)")
                #expect(directory.damagedFiles().isEmpty, "round \(round): \(directory.names())")
                if FileManager.default.fileExists(atPath: directory.backup) {
                    #expect(try await Self.integrity(of: directory.backup) == "ok", "round \(round): the backup")
                }
                let serial = try await calls.serial()
                let acknowledgedSerial = writers.map(\.highestSerial).max() ?? 0
                #expect(serial >= lastSerial, "round \(round): the serial went back from \(lastSerial) to \(serial)")
                #expect(serial >= acknowledgedSerial, "round \(round): serial \(serial), acknowledged \(acknowledgedSerial)")
                lastSerial = serial
                for writer in writers {
                    let inFlight = writer.lastValue + 1
                    for (key, value) in writer.acknowledged {
                        let stored = try await calls.get(key)
                        let allowed: [DBusValue] =
                            writer.key(of: inFlight) == key ? [.int64(value), .int64(inFlight)] : [.int64(value)]
                        #expect(allowed.contains(stored), "round \(round): \(key) acknowledged \(value), stored \(stored)")
                    }
                }
                for writer in writers { writer.process.child.signal(SIGCONT) }
            }

            let elapsed = ContinuousClock.now - started
            for writer in writers { await writer.process.terminate() }
            await checker.close()
            #expect(await broker.stop() == 0)
            let total = writers.map(\.total).reduce(0, +)
            print(
                "crash recovery: \(Self.rounds) SIGKILL rounds in \(elapsed), \(total) acknowledged writes from "
                    + "\(Self.writerCount) python3-dbus writers, none lost; final serial \(lastSerial)")
        }
    }
}
