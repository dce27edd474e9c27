// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
internal import Glibc

extension Bench {
    /// A write in this process reaching a stream in another, then reaching all of 10 and 50 others.
    ///
    /// Subscribers print each value they receive with a `CLOCK_MONOTONIC` time stamp, a clock shared by
    /// every process; a delivery is timed from just before the write call to the stamp.
    func measureDelivery() async throws {
        progress("delivery to another process (\(plan.deliveries) writes each)")
        let (delivery, dconfDelivery) = try await fanOut(
            subscribers: 1, writes: plan.deliveries, directory: "/bench/delivery/")
        results.delivery = delivery
        results.dconfDelivery = dconfDelivery
        for count in plan.fanOuts {
            progress("delivery to all of \(count) subscriber processes (\(plan.fanOutWrites) writes each)")
            let (bus, dconf) = try await fanOut(
                subscribers: count, writes: plan.fanOutWrites, directory: "/bench/fan-out-\(count)/")
            results.fanOut[count] = bus
            results.dconfFanOut[count] = dconf
        }
        if let count = plan.fanOuts.last {
            progress("delivery to all of \(count) subscriber processes consuming on their connection's thread")
            let (bus, dconf) = try await fanOut(
                subscribers: count, writes: plan.fanOutWrites, directory: "/bench/fan-out-executor-\(count)/",
                executor: "connection")
            results.fanOutOnConnection = bus
            results.dconfFanOutBeside = dconf
        }
    }

    /// Starts `subscribers` processes of each system watching one key, writes it `writes` times (the two
    /// systems alternate) and times each write until the last subscriber has it. SettingsBus subscribers
    /// consume their stream on the global executor, or with `executor` "connection" on their store's.
    ///
    /// The subscribers of each system print to one pipe, read on one thread (`SharedOutput`): the bench
    /// then wakes a few times per write instead of once per subscriber, and takes less of the two CPUs the
    /// subscribers share while they receive.
    private func fanOut(
        subscribers: Int, writes: Int, directory: String, executor: String = "global"
    ) async throws -> (Samples, Samples) {
        let key = SettingKey(try SettingPath(directory + "key"), default: "")
        try await settings.set(key, to: "initial")
        if dconf != nil { try await dconfChange([(key.path.rawValue, "initial")]) }

        let errorLog = root.appendingPathComponent("subscribers.log").path
        let busOutput = try SharedOutput(errorLog: errorLog)
        let dconfOutput = try SharedOutput(errorLog: errorLog)
        do {
            for _ in 0..<subscribers {
                try busOutput.start(
                    benchExecutable,
                    ["--role", "subscriber", "--bus", bus.address, "--key", key.path.rawValue, "--executor", executor],
                    environment: environment)
                if let probe {
                    try dconfOutput.start(probe.executable, ["watch", directory, key.path.rawValue], environment: environment)
                }
            }
            // Each subscriber prints the current value once it is subscribed.
            _ = try await busOutput.lines(prefix: "initial ", count: subscribers)
            if probe != nil { _ = try await dconfOutput.lines(prefix: "initial ", count: subscribers) }

            var bus = Samples()
            var dconf = Samples()
            try await boundedLoop(count: writes, seconds: plan.loopSeconds * 2) { index in
                let value = "value-\(index)"
                var start = monotonicNanoseconds()
                try await settings.set(key, to: value)
                bus.append(Double(try await lastStamp(of: value, count: subscribers, in: busOutput) &- start))
                if self.dconf != nil {
                    start = monotonicNanoseconds()
                    try await dconfChange([(key.path.rawValue, value)])
                    dconf.append(Double(try await lastStamp(of: value, count: subscribers, in: dconfOutput) &- start))
                }
            }
            await busOutput.terminateAll()
            await dconfOutput.terminateAll()
            return (bus, dconf)
        } catch {
            // Every subscriber is ended by its pid, however the measurement ends.
            await busOutput.terminateAll()
            await dconfOutput.terminateAll()
            throw error
        }
    }

    /// Waits for `count` lines `<value> <ns>`; returns the latest time stamp among them.
    private func lastStamp(of value: String, count: Int, in output: SharedOutput) async throws -> UInt64 {
        var last: UInt64 = 0
        for line in try await output.lines(prefix: value + " ", count: count) {
            guard let stamp = line.split(separator: " ").last.flatMap({ UInt64($0) }) else {
                throw BenchFailure("unexpected line from a subscriber: \(line)")
            }
            last = max(last, stamp)
        }
        return last
    }
}
