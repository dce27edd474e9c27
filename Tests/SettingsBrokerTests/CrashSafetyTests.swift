// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// No acknowledged write is lost when the broker is killed at random moments while writers run.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct CrashSafetyTests {
    static let rounds = 20
    static let writers = 3

    /// A writer: sets its own key to 1, 2, 3, … with gdbus, and prints each value the broker acknowledged.
    /// A call that fails (the broker is down) is simply tried again with the same value.
    static func writerScript(_ index: Int) -> String {
        """
        i=0
        while true; do
            next=$((i + 1))
            if gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
                --method io.github.settingsbus.Settings1.Set /test/crash/writer-\(index) "<int64 $next>" >/dev/null 2>&1; then
                i=$next
                echo "$i"
            fi
        done
        """
    }

    static func read(_ connection: DBusConnection, _ member: MemberName, _ arguments: [DBusValue]) async throws
        -> [DBusValue]
    {
        try await connection.call(
            destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
            interface: "io.github.settingsbus.Settings1", member: member, arguments: arguments)
    }

    @Test func acknowledgedWritesSurviveSIGKILLAtRandomMoments() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("crash-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = directory.appendingPathComponent("settings.db").path

        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus, storePath: store)
            let writers = try (0..<Self.writers).map {
                try RunningProcess.start("/bin/bash", ["-c", Self.writerScript($0)], environment: bus.environment)
            }
            let checker = try await bus.connect()
            var acknowledged = [Int64](repeating: 0, count: Self.writers)
            var lastSerial: UInt64 = 0
            var killedWithWritesInFlight = 0

            for round in 1...Self.rounds {
                // Given: every writer has had a write acknowledged by this broker.
                for (index, writer) in writers.enumerated() {
                    let line = try #require(try await writer.nextLine(timeLimit: .seconds(30)))
                    acknowledged[index] = max(acknowledged[index], Int64(line) ?? 0)
                }
                // When: the broker is killed at a random moment while the writers go on.
                try await Task.sleep(for: .milliseconds(Int.random(in: 10...150)))
                if await broker.kill() == 137 { killedWithWritesInFlight += 1 }
                broker = try await TestBroker.start(on: bus, storePath: store)

                // Then: the store opened (the broker took its name), every write acknowledged before now is
                // there, and the serial did not go backwards.
                for (index, writer) in writers.enumerated() {
                    // Take the lines already printed, without waiting for new ones.
                    while let line = try? await writer.nextLine(timeLimit: .milliseconds(5)), let value = Int64(line) {
                        acknowledged[index] = max(acknowledged[index], value)
                    }
                }
                for index in 0..<Self.writers {
                    let reply = try await Self.read(checker, "Get", [.string("/test/crash/writer-\(index)")])
                    guard case .variant(.int64(let stored))? = reply.first else {
                        Issue.record("round \(round): writer \(index) has no value: \(reply)")
                        continue
                    }
                    #expect(stored >= acknowledged[index], "round \(round): writer \(index) acknowledged \(acknowledged[index]), stored \(stored)")
                }
                let serialReply = try await checker.call(
                    destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
                    interface: "org.freedesktop.DBus.Properties", member: "Get",
                    arguments: [.string("io.github.settingsbus.Settings1"), .string("Serial")])
                guard case .variant(.uint64(let serial))? = serialReply.first else {
                    Issue.record("round \(round): no Serial: \(serialReply)")
                    continue
                }
                #expect(serial >= lastSerial, "round \(round): the serial went back from \(lastSerial) to \(serial)")
                lastSerial = serial
            }

            for writer in writers { await writer.terminate() }
            await checker.close()
            #expect(await broker.stop() == 0)
            #expect(killedWithWritesInFlight == Self.rounds)
            print("crash safety: \(Self.rounds) SIGKILL rounds, \(acknowledged.reduce(0, +)) acknowledged writes, "
                + "none lost; final serial \(lastSerial)")
        }
    }
}
