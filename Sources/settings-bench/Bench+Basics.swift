// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel

extension Bench {
    /// Floors, `Get`, local reads and durable writes, with the broker on a fresh store.
    func measureBasics() async throws {
        try await useFreshBrokerStore("basics")
        try await useFreshDconfDatabase()
        progress("starting the broker\(dconf == nil ? "" : " and dconf-service") by D-Bus activation")
        try await ping(broker.name)
        let getKey = SettingKey(try SettingPath("/bench/basic/get"), default: "")
        try await settings.set(getKey, to: "a value")
        if dconf != nil { try await dconfChange([("/bench/basic/read", "a value")]) }

        // Round trips, interleaved so that every kind sees the same conditions. Where a call falls in the
        // cycle matters: with a fixed order, one place in it could take about 25 µs longer than the others,
        // whichever call sat there (a Ping as much as a Get), so each round starts one kind further on.
        var kinds: [RoundTrip] = [.getID, .pingBroker, .rawGet, .clientGet]
        if dconf != nil { kinds.append(.pingDconf) }
        progress("round trips: \(kinds.map(\.label).joined(separator: ", ")) (\(plan.roundTrips) each, rotating)")
        try await boundedLoop(count: plan.warmUp + plan.roundTrips, seconds: plan.loopSeconds) { index in
            let recorded = index >= plan.warmUp
            for offset in kinds.indices {
                let kind = kinds[(index + offset) % kinds.count]
                let start = monotonicNanoseconds()
                switch kind {
                case .getID: try await getID()
                case .pingBroker: try await ping(broker.name)
                case .rawGet: try await rawGet(getKey.path.rawValue)
                case .clientGet: _ = try await settings.get(getKey)
                case .pingDconf: try await ping(Self.dconfName)
                }
                if recorded { results.append(kind, since: start) }
            }
        }

        try await measureCachedReads()
        try await measureUnwatchedGets()
        try await measureDurableWrites()
    }

    /// The calls timed in the round-trip loop.
    enum RoundTrip {
        case getID, pingBroker, rawGet, clientGet, pingDconf

        var label: String {
            switch self {
            case .getID: "GetId"
            case .pingBroker: "Peer.Ping to the broker"
            case .rawGet: "Get"
            case .clientGet: "get(key)"
            case .pingDconf: "Peer.Ping to dconf-service"
            }
        }
    }

    /// `cached(key)` of a watched key, and dconf's in-process read of its mmap'd database.
    private func measureCachedReads() async throws {
        progress("local reads (\(plan.cachedReadBatches) × 1000)")
        let key = SettingKey(try SettingPath("/bench/basic/cached"), default: "")
        try await settings.set(key, to: "a cached value")
        let settings = self.settings
        let watch = Task { for await _ in settings.values(for: key) {} }
        defer { watch.cancel() }
        try await boundedLoop(count: 10_000, seconds: plan.loopSeconds) { _ in
            if settings.cached(key) == nil { try await Task.sleep(for: .milliseconds(1)) }
        }
        guard settings.cached(key) != nil else {
            throw BenchFailure("the watched key never became readable locally")
        }
        let before = await settings.sentMessageCount()
        var perRead = Samples()
        var total = 0
        for _ in 0..<plan.cachedReadBatches {
            let start = monotonicNanoseconds()
            for _ in 0..<1000 { total &+= settings.cached(key)?.utf8.count ?? 0 }
            perRead.append(Double(monotonicNanoseconds() - start) / 1000)
        }
        let after = await settings.sentMessageCount()
        precondition(total > 0)
        results.cachedRead = perRead.p50
        if let before, let after { results.cachedReadMessages = UInt32(truncatingIfNeeded: after &- before) }

        if let probe {
            let result = try await TestProcess.run(
                probe.executable, ["read", "/bench/basic/read", String(plan.cachedReadBatches)],
                environment: environment)
            let fields = result.stdout.split(separator: " ")
            guard result.status == 0, fields.count >= 2, fields[0] == "read", let perRead = Double(fields[1]) else {
                throw BenchFailure("the dconf probe failed: \(result.stdout) \(result.stderr)")
            }
            results.dconfRead = perRead
        }
    }

    /// `get(key)` of a key a store does not watch, in a store of its own that is connected and has read nothing:
    /// from the broker's view where it publishes one (decision 0037), else a `GetMany`.
    private func measureUnwatchedGets() async throws {
        progress("gets of a key no store watches (\(plan.cachedReadBatches) × 100)")
        let key = SettingKey(try SettingPath("/bench/basic/unwatched"), default: "")
        try await settings.set(key, to: "a value no one watches")
        try await waitForTheView()
        let fresh = BusSettingsStore(bus: .address(bus.address))
        _ = try await fresh.uniqueName()
        let before = await fresh.sentMessageCount()
        var start = monotonicNanoseconds()
        _ = try await fresh.get(key)
        results.unwatchedFirstGet = Double(monotonicNanoseconds() - start)
        var perRead = Samples()
        for _ in 0..<plan.cachedReadBatches {
            start = monotonicNanoseconds()
            for _ in 0..<100 { _ = try await fresh.get(key) }
            perRead.append(Double(monotonicNanoseconds() - start) / 100)
        }
        let after = await fresh.sentMessageCount()
        results.unwatchedGet = perRead.p50
        if let before, let after { results.unwatchedGetMessages = UInt32(truncatingIfNeeded: after &- before) }
        await fresh.close()
    }

    /// Waits (5 s at most) for the broker's view to be complete, when it publishes one.
    func waitForTheView() async throws {
        guard let runtime = environment["XDG_RUNTIME_DIR"] else { return }
        let folder = runtime + "/settingsbus/view"
        guard FileManager.default.fileExists(atPath: folder) else { return }
        let deadline = ContinuousClock.now + .seconds(5)
        while !FileManager.default.fileExists(atPath: folder + "/complete"), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// One key written again and again, each write answered after it is durable; the two systems alternate.
    private func measureDurableWrites() async throws {
        progress("durable writes (\(plan.durableWrites) each)")
        let key = SettingKey(try SettingPath("/bench/basic/set"), default: "")
        try await boundedLoop(count: plan.warmUp / 10 + plan.durableWrites, seconds: plan.loopSeconds * 2) { index in
            let recorded = index >= plan.warmUp / 10
            var start = monotonicNanoseconds()
            try await settings.set(key, to: "value \(index)")
            if recorded { results.durableSet.append(since: start) }
            if dconf != nil {
                start = monotonicNanoseconds()
                try await dconfChange([(key.path.rawValue, "value \(index)")])
                if recorded { results.dconfWrite.append(since: start) }
            }
        }
    }
}

extension BenchResults {
    /// Records one timed round trip of `kind`.
    mutating func append(_ kind: Bench.RoundTrip, since start: UInt64) {
        switch kind {
        case .getID: getID.append(since: start)
        case .pingBroker: pingBroker.append(since: start)
        case .rawGet: rawGet.append(since: start)
        case .clientGet: clientGet.append(since: start)
        case .pingDconf: pingDconf.append(since: start)
        }
    }
}
