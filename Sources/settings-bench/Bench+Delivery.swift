// SPDX-License-Identifier: Apache-2.0

import DBus
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
    private func fanOut(
        subscribers: Int, writes: Int, directory: String, executor: String = "global"
    ) async throws -> (Samples, Samples) {
        let key = SettingKey(try SettingPath(directory + "key"), default: "")
        try await settings.set(key, to: "initial")
        if dconf != nil { try await dconfChange([(key.path.rawValue, "initial")]) }

        var processes: [RunningProcess] = []
        var busSubscribers: [RunningProcess] = []
        var dconfSubscribers: [RunningProcess] = []
        defer {
            // Every subscriber is ended by its pid, however the measurement ends.
            for process in processes { process.child.signal(SIGTERM) }
        }
        for _ in 0..<subscribers {
            let process = try start(
                benchExecutable,
                ["--role", "subscriber", "--bus", bus.address, "--key", key.path.rawValue, "--executor", executor])
            processes.append(process)
            busSubscribers.append(process)
            if let probe {
                let process = try start(probe.executable, ["watch", directory, key.path.rawValue])
                processes.append(process)
                dconfSubscribers.append(process)
            }
        }
        // Each subscriber prints the current value once it is subscribed.
        for process in processes { _ = try await receipt(of: "initial", from: process) }

        var bus = Samples()
        var dconf = Samples()
        try await boundedLoop(count: writes, seconds: plan.loopSeconds * 2) { index in
            let value = "value-\(index)"
            var start = monotonicNanoseconds()
            try await settings.set(key, to: value)
            var last: UInt64 = 0
            for process in busSubscribers { last = max(last, try await receipt(of: value, from: process)) }
            bus.append(Double(last &- start))
            if self.dconf != nil {
                start = monotonicNanoseconds()
                try await dconfChange([(key.path.rawValue, value)])
                last = 0
                for process in dconfSubscribers { last = max(last, try await receipt(of: value, from: process)) }
                dconf.append(Double(last &- start))
            }
        }
        for process in processes { await process.terminate() }
        processes = []
        return (bus, dconf)
    }
}
