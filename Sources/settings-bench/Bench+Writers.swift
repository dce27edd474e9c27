// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
internal import Glibc

extension Bench {
    /// 1, 4 and 16 writer processes writing distinct keys as fast as their writes are acknowledged; then a
    /// check that every acknowledged write is stored.
    func measureWriters() async throws {
        for count in plan.writerCounts {
            progress("\(count) concurrent writer processes, \(plan.writerSeconds) s each system")
            let prefix = "/bench/writers/\(count)/"
            results.writers[count] = try await writers(count, system: "settingsbus", prefix: prefix) { counts in
                let snapshot = try await settings.readTree(try SettingDirectory(prefix))
                var missing = 0
                for (writer, acknowledged) in counts.enumerated() {
                    for index in 0..<acknowledged {
                        let key = try SettingPath("\(prefix)w\(writer)/k\(index)")
                        if snapshot.values[key] != .string("w\(writer)-\(index)") { missing += 1 }
                    }
                }
                try await settings.reset(try SettingDirectory(prefix))
                return missing
            }
            guard dconf != nil, let probe else { continue }
            results.dconfWriters[count] = try await writers(count, system: "dconf", prefix: prefix) { counts in
                let result = try await TestProcess.run(
                    probe.executable, ["check", prefix] + counts.map(String.init), environment: environment)
                let fields = result.stdout.split(whereSeparator: \.isWhitespace)
                guard result.status == 0, fields.count == 2, let missing = Int(fields[1]) else {
                    throw BenchFailure("the dconf check failed: \(result.stdout) \(result.stderr)")
                }
                try await dconfChange([(prefix, nil)])
                return missing
            }
        }
    }

    /// Runs `count` writer processes of one system together; `check` gets each writer's acknowledged count
    /// and returns how many of those writes are missing.
    private func writers(
        _ count: Int, system: String, prefix: String, check: ([Int]) async throws -> Int
    ) async throws -> WriterRun {
        var processes: [RunningProcess] = []
        defer { for process in processes { process.child.signal(SIGTERM) } }
        for id in 0..<count {
            processes.append(
                try start(
                    benchExecutable,
                    [
                        "--role", "writer", "--system", system, "--bus", bus.address, "--prefix", prefix,
                        "--id", String(id), "--seconds", String(plan.writerSeconds),
                    ]))
        }
        for process in processes {
            guard try await process.nextLine(timeLimit: .seconds(60)) == "ready" else {
                throw BenchFailure("a writer did not start: \(await process.standardError())")
            }
        }
        for process in processes { process.write("go\n") }
        var acknowledged: [Int] = []
        var failed = 0
        var first = UInt64.max
        var last: UInt64 = 0
        for process in processes {
            // done <acknowledged> <failed> <first ns> <last ns>
            let line = try await process.nextLine(timeLimit: .seconds(plan.writerSeconds + 60)) ?? ""
            let fields = line.split(separator: " ")
            guard fields.count == 5, fields[0] == "done", let acked = Int(fields[1]), let failures = Int(fields[2]),
                let start = UInt64(fields[3]), let end = UInt64(fields[4])
            else {
                throw BenchFailure("a writer printed '\(line)': \(await process.standardError())")
            }
            acknowledged.append(acked)
            failed += failures
            first = min(first, start)
            last = max(last, end)
        }
        for process in processes { _ = await process.waitForExit() }
        processes = []
        let total = acknowledged.reduce(0, +)
        let seconds = Double(last &- first) / 1e9
        return WriterRun(
            writesPerSecond: seconds > 0 ? Double(total) / seconds : 0, acknowledged: total, failed: failed,
            missing: try await check(acknowledged))
    }
}
