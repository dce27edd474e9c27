// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// Many client processes at once: no failed call, no lost change, and a broker whose memory and open files
/// stay flat.
@Suite(.sharingTheMachine, .timeLimit(.minutes(4)))
struct LoadTests {
    /// 50 client processes; `SETTINGSBUS_LOAD_CLIENTS` lowers it where each process is many times slower
    /// (`scripts/sanitize` runs 10 under the sanitizers).
    static let clients = Int(ProcessInfo.processInfo.environment["SETTINGSBUS_LOAD_CLIENTS"] ?? "") ?? 50
    static let keys = 8
    static let seconds = 8

    /// The broker's resident memory in KiB and its number of open file descriptors.
    static func footprint(of pid: Int32) throws -> (rssKiB: Int, fds: Int) {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        let rss = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
        return (rss, fds)
    }

    @Test func manyClientsMixingReadsWritesAndWatches() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let store = BusSettingsStore(bus: .address(bus.address))
            // The baseline once the broker has done what it starts in the background (its view, its first
            // backup), which opens descriptors of its own.
            try await broker.waitUntilSettled()
            let before = try Self.footprint(of: broker.pid)

            // Given: 50 client processes, each watching every key and mixing reads, writes and short watches.
            let executable = try BuiltProduct.path("settingsbus-load-client")
            var clients: [RunningProcess] = []
            for id in 0..<Self.clients {
                clients.append(
                    try RunningProcess.start(
                        executable, ["\(id)", "\(Self.keys)", "\(Self.seconds)"], environment: bus.environment))
            }
            var written = 0
            for client in clients {
                let line = try #require(try await client.nextLine(timeLimit: .seconds(120)))
                #expect(line.hasPrefix("written "), "\(line)")
                written += Int(line.dropFirst("written ".count)) ?? 0
            }
            let during = try Self.footprint(of: broker.pid)

            // When: every client has stopped writing, the last value of each key is written.
            try await store.transaction { transaction throws(SettingsError) in
                for index in 0..<Self.keys {
                    transaction.set(try SettingPath("/test/load/key-\(index)"), to: .string("final-\(index)"))
                }
            }

            // Then: every watcher ends on it, and no client saw a failed call.
            for client in clients {
                #expect(try await client.nextLine(timeLimit: .seconds(90)) == "converged")
                let status = await client.waitForExit()
                let errors = status == 0 ? "" : await client.standardError()
                #expect(status == 0, "\(errors)")
            }
            await store.close()
            let after = try Self.footprint(of: broker.pid)
            print("load: \(Self.clients) clients, \(written) writes in \(Self.seconds) s; broker RSS "
                + "\(before.rssKiB) KiB before, \(during.rssKiB) KiB under load, \(after.rssKiB) KiB after; "
                + "fds \(before.fds) before, \(during.fds) under load, \(after.fds) after")
            #expect(written > 0)
            #expect(after.fds <= before.fds + 2, "open file descriptors grew: \(before.fds) → \(after.fds)")
            #expect(after.rssKiB < before.rssKiB + 64 * 1024, "memory grew: \(before.rssKiB) → \(after.rssKiB) KiB")
            #expect(await broker.stop() == 0)
        }
    }
}
