// SPDX-License-Identifier: Apache-2.0

import Foundation

/// The Markdown table of a run: measure | SettingsBus | dconf | ratio | target | met?
struct BenchReport {
    let results: BenchResults
    let plan: BenchPlan
    let dconfMissing: String?
    let isSmoke: Bool

    private struct Row {
        var measure: String
        var settingsBus: String
        var dconf: String
        var ratio: String = "—"
        var target: String = ""
        var met: Bool?
    }

    func markdown() -> String {
        var rows: [Row] = []
        let r = results
        let noDconf = dconfMissing == nil ? "n/a" : "not run"

        rows.append(
            Row(
                measure: "floor: `GetId` to the bus daemon, p50", settingsBus: Format.duration(r.getID.p50),
                dconf: "(same bus)"))
        rows.append(
            Row(
                measure: "floor: `Peer.Ping` to the service, p50", settingsBus: Format.duration(r.pingBroker.p50),
                dconf: dconfValue(Format.duration(r.pingDconf.p50)),
                ratio: ratio(r.pingBroker.p50, r.pingDconf.p50, "dconf")))
        let getRatio = r.rawGet.p50.flatMap { get in r.pingBroker.p50.map { get / $0 } }
        rows.append(
            Row(
                measure: "`Get` round trip, p50 / p99", settingsBus: Format.percentiles(r.rawGet),
                dconf: "— (reads never reach dconf-service)", ratio: ratio(r.rawGet.p50, r.pingBroker.p50, "Ping"),
                target: "p50 ≤ 1.2× Ping to the broker", met: getRatio.map { $0 <= 1.2 }))
        rows.append(
            Row(
                measure: "client `get(key)` of an unwatched key (the broker's view when it publishes one, else `GetMany`), p50 / p99",
                settingsBus: Format.percentiles(r.clientGet), dconf: "—",
                ratio: ratio(r.clientGet.p50, r.pingBroker.p50, "Ping")))
        let cachedMet: Bool? = r.cachedRead.flatMap { cached in
            r.dconfRead.map { cached <= $0 && cached <= 300 && r.cachedReadMessages == 0 }
        }
        rows.append(
            Row(
                measure: "read of a watched key: `cached(key)` / dconf's mmap read (`dconf_client_read`)",
                settingsBus: Format.duration(r.cachedRead) + messages(r.cachedReadMessages),
                dconf: dconfValue(Format.duration(r.dconfRead)), ratio: ratio(r.cachedRead, r.dconfRead, "dconf"),
                target: "≤ dconf's (≤ 0.3 µs), no bus message", met: cachedMet))
        rows.append(
            Row(
                measure: "`get(key)` of a key no store watches, in a store that has read nothing: first / later "
                    + "(the broker's view, decision 0037) / dconf's mmap read",
                settingsBus: Format.duration(r.unwatchedFirstGet) + " / " + Format.duration(r.unwatchedGet)
                    + messages(r.unwatchedGetMessages),
                dconf: dconfValue(Format.duration(r.dconfRead)), ratio: ratio(r.unwatchedFirstGet, r.dconfRead, "dconf (first)"),
                target: "first ≤ 1 µs, no bus message",
                met: r.unwatchedFirstGet.map { $0 <= 1000 && r.unwatchedGetMessages == 0 }))
        rows.append(
            halfOfDconf(
                "durable write of one key (`Set`; dconf `Change`), p50 / p99", r.durableSet, r.dconfWrite,
                target: true))
        rows.append(halfOfDconf("write in A → value in B's stream, p50 / p99", r.delivery, r.dconfDelivery, target: true))
        for (index, count) in plan.fanOuts.enumerated() {
            rows.append(
                halfOfDconf(
                    "write → all of \(count) subscriber processes have it, p50 / p99", r.fanOut[count] ?? Samples(),
                    r.dconfFanOut[count] ?? Samples(), target: index == plan.fanOuts.count - 1))
        }
        if let count = plan.fanOuts.last {
            rows.append(
                halfOfDconf(
                    "… all of \(count), each consuming its stream on its connection's thread "
                        + "(`Task(executorPreference: settings.executor)`), p50 / p99",
                    r.fanOutOnConnection, r.dconfFanOutBeside, target: false))
        }
        for (index, count) in plan.writerCounts.enumerated() {
            let run = r.writers[count], other = r.dconfWriters[count]
            let last = index == plan.writerCounts.count - 1
            var met: Bool?
            if last, let run, let other {
                met = run.writesPerSecond >= 10 * other.writesPerSecond && run.missing == 0 && run.failed == 0
            }
            rows.append(
                Row(
                    measure: "\(count) concurrent writer process\(count == 1 ? "" : "es"): acknowledged writes/s",
                    settingsBus: writerCell(run), dconf: dconfValue(writerCell(other)),
                    ratio: ratio(run?.writesPerSecond, other?.writesPerSecond, "dconf"),
                    target: last ? "≥ 10× dconf, nothing lost" : "", met: met))
        }
        let largest = plan.storeSizes.last ?? 0
        let empty = r.sizes[0]?.writes.p50
        for size in [0] + plan.storeSizes {
            let run = r.sizes[size], other = r.dconfSizes[size]
            var row = halfOfDconf(
                "durable write with \(count(size)) in the store, p50 / p99", run?.writes ?? Samples(),
                other?.writes ?? Samples(), target: false)
            if size == largest, let p50 = run?.writes.p50, let empty {
                row.target = "p50 ≤ 1.5× with no keys (here \(Format.ratio(p50, empty)))"
                row.met = p50 <= 1.5 * empty
            }
            rows.append(row)
        }
        for size in [0] + plan.storeSizes { rows.append(idleMemoryRow(size)) }
        for size in plan.storeSizes {
            let run = r.sizes[size], other = r.dconfSizes[size]
            var row = Row(
                measure: "service memory (VmRSS) with \(count(size)), after the writes",
                settingsBus: Format.memory(run?.residentKiB),
                dconf: dconfValue(Format.memory(other?.residentKiB)),
                ratio: ratio(run?.residentKiB.map(Double.init), other?.residentKiB.map(Double.init), "dconf"))
            if size == largest {
                row.target = "≤ 0.5× dconf-service's"
                if let mine = run?.residentKiB, let theirs = other?.residentKiB { row.met = Double(mine) <= 0.5 * Double(theirs) }
            }
            rows.append(row)
        }
        for size in plan.storeSizes {
            let run = r.sizes[size], other = r.dconfSizes[size]
            var row = Row(
                measure: "start by D-Bus activation → first reply, with \(count(size)), median",
                settingsBus: Format.duration(run?.start.p50), dconf: dconfValue(Format.duration(other?.start.p50)),
                ratio: ratio(run?.start.p50, other?.start.p50, "dconf"))
            if size == largest, let start = run?.start.p50 {
                row.target = "< 100 ms"
                row.met = start < 100e6
            }
            rows.append(row)
        }
        let load = r.sizes[largest]?.load, dconfLoad = r.dconfSizes[largest]?.load
        rows.append(
            Row(
                measure: "load \(count(largest)) in one call (`Apply`; dconf one `Change`)",
                settingsBus: Format.duration(load), dconf: dconfValue(Format.duration(dconfLoad)),
                ratio: ratio(load, dconfLoad, "dconf")))

        if let d = r.directories {
            let beside = count(d.storeKeys), big = count(d.bigKeys)
            for (method, alone, besideBig) in [
                ("ReadTree", d.smallReadTreeAlone, d.smallReadTreeBeside), ("List", d.smallListAlone, d.smallListBeside),
            ] {
                rows.append(
                    Row(
                        measure: "`\(method)` of a 3-key directory, alone / beside \(beside), p50",
                        settingsBus: "\(Format.duration(alone.p50)) / \(Format.duration(besideBig.p50))",
                        dconf: "—", ratio: "\(Format.ratio(besideBig.p50, alone.p50)) alone",
                        target: "near 1×", met: nearOne(besideBig.p50, alone.p50)))
            }
            rows.append(
                Row(
                    measure: "another client's `Get`, nothing else going on, p50 / p99 / max",
                    settingsBus: Format.percentilesAndMax(d.quietGets), dconf: "—"))
            rows.append(
                Row(
                    measure: "… while `ReadTree` of a directory of \(big) runs (\(Format.percentiles(d.bigReadTree)) each), p50 / p99 / max",
                    settingsBus: Format.percentilesAndMax(d.getsDuringReadTree), dconf: "—",
                    ratio: "\(Format.ratio(d.getsDuringReadTree.p50, d.quietGets.p50)) / "
                        + "\(Format.ratio(d.getsDuringReadTree.p99, d.quietGets.p99)) quiet"))
            rows.append(
                Row(
                    measure: "… while `Reset` of a directory of \(big) runs (\(Format.percentiles(d.bigReset)) each), p50 / p99 / max",
                    settingsBus: Format.percentilesAndMax(d.getsDuringReset), dconf: "—",
                    ratio: "\(Format.ratio(d.getsDuringReset.p50, d.quietGets.p50)) / "
                        + "\(Format.ratio(d.getsDuringReset.p99, d.quietGets.p99)) quiet"))
        }

        if let a = r.administrator {
            let layer = "an administrator's layer of \(count(a.keys)) and \(a.locks) locks"
            rows.append(
                Row(
                    measure: "`Get` of a user's value with \(layer) / with none, p50 / p99",
                    settingsBus: "\(Format.percentiles(a.getWith)) / \(Format.percentiles(a.getWithout))", dconf: "—",
                    ratio: "\(Format.ratio(a.getWith.p50, a.getWithout.p50)) none", target: "≤ 1.1× (no measurable cost)",
                    met: a.getWith.p50.flatMap { with in a.getWithout.p50.map { with <= 1.1 * $0 } }))
            rows.append(
                Row(
                    measure: "… `Get` of a locked key, p50 / p99", settingsBus: Format.percentiles(a.getLocked),
                    dconf: "—", ratio: "\(Format.ratio(a.getLocked.p50, a.getWithout.p50)) none"))
            rows.append(
                Row(
                    measure: "start by D-Bus activation → first reply, with \(layer) / with none, median",
                    settingsBus: "\(Format.duration(a.startWith.p50)) / \(Format.duration(a.startWithout.p50))",
                    dconf: "—", ratio: "\(Format.ratio(a.startWith.p50, a.startWithout.p50)) none"))
        }

        if let sandbox = r.sandbox {
            for (who, samples) in [("host", sandbox.host), ("sandboxed", sandbox.sandboxed)] {
                guard let samples else {
                    rows.append(
                        Row(
                            measure: "first `Get` of a new \(who) connection", settingsBus: "—", dconf: "—",
                            ratio: sandbox.sandboxedMissing ?? "not measured"))
                    continue
                }
                rows.append(
                    Row(
                        measure: "first `Get` of a new \(who) connection (the caller identified) / its first `Peer.Ping`, p50",
                        settingsBus: "\(Format.duration(samples.firstGet.p50)) / \(Format.duration(samples.firstPing.p50))",
                        dconf: "—", ratio: "\(Format.ratio(samples.firstGet.p50, samples.firstPing.p50)) Ping"))
                rows.append(
                    Row(
                        measure: "… `Get` of the \(who) caller once known / its `Peer.Ping`, p50",
                        settingsBus: "\(Format.duration(samples.knownGet.p50)) / \(Format.duration(samples.knownPing.p50))",
                        dconf: "—", ratio: "\(Format.ratio(samples.knownGet.p50, samples.knownPing.p50)) Ping"))
            }
        }

        if let gsettings = r.gsettings { rows += gsettingsRows(gsettings) }
        if let sync = r.sync { rows += syncRows(sync) }
        if let editor = r.editor { rows += editorRows(editor) }

        var text = "| measure | SettingsBus | dconf | ratio | target | met? |\n| --- | --- | --- | --- | --- | --- |\n"
        for row in rows {
            let met = row.met.map { $0 ? "yes" : "**no**" } ?? (row.target.isEmpty ? "" : "n/a")
            let dconf = dconfMissing == nil || row.dconf == "(same bus)" ? row.dconf : noDconf
            text += "| \(row.measure) | \(row.settingsBus) | \(dconf) | \(row.ratio) | \(row.target) | \(met) |\n"
        }
        if let dconfMissing { text += "\ndconf was not measured: \(dconfMissing)\n" }
        if let gsettingsMissing = r.gsettingsMissing { text += "\nGSettings was not measured: \(gsettingsMissing)\n" }
        if let missing = r.gsettings?.dconfMissing, dconfMissing == nil {
            text += "\ndconf's GSettings backend was not measured: \(missing)\n"
        }
        if let syncMissing = r.syncMissing { text += "\nsync was not measured: \(syncMissing)\n" }
        if isSmoke { text += "\nSmoke run: the counts are too small for the figures to mean anything.\n" }
        return text
    }

    /// The GIO module against dconf's GSettings backend, in the same C app (`gsettings-probe`).
    private func editorRows(_ run: EditorRun) -> [Row] {
        let keys = count(run.keys)
        return [
            Row(
                measure: "settings editor, \(keys) registered: start → its address (store read and walked), median",
                settingsBus: Format.duration(run.start.p50), dconf: "—"),
            Row(
                measure: "… opening its page (page, script, style, `/` and a directory of 100 keys over HTTP), p50 / p99",
                settingsBus: Format.percentiles(run.pageLoad), dconf: "—", target: "< 1 s",
                met: run.pageLoad.p99.map { $0 < 1e9 }),
            Row(
                measure: "… a directory of 100 keys, each described, p50 / p99",
                settingsBus: Format.percentiles(run.directory), dconf: "—"),
            Row(
                measure: "… every key's summary and description read for search, after its address",
                settingsBus: Format.duration(run.indexed), dconf: "—"),
            Row(
                measure: "… search of names, summaries and descriptions matching 1 key / a tenth, p50 / p99",
                settingsBus: "\(Format.percentiles(run.searchOne)) / \(Format.percentiles(run.searchMany))", dconf: "—",
                target: "< 200 ms", met: run.searchMany.p99.flatMap { many in run.searchOne.p99.map { max(many, $0) < 200e6 } }),
        ]
    }

    private func gsettingsRows(_ run: GSettingsRun) -> [Row] {
        var rows: [Row] = []
        rows.append(
            Row(
                measure: "GSettings: `g_settings_get_value` of a watched key in a C app: the module's copy / dconf's mmap read",
                settingsBus: Format.duration(run.read), dconf: dconfValue(Format.duration(run.dconfRead)),
                ratio: ratio(run.read, run.dconfRead, "dconf"), target: "≤ dconf's",
                met: run.read.flatMap { mine in run.dconfRead.map { mine <= $0 } }))
        var delivery = halfOfDconf(
            "GSettings: `g_settings_set` in one app → `changed` handler in another, p50 / p99", run.delivery,
            run.dconfDelivery, target: true)
        if run.dconfDelivery.isEmpty { delivery.met = nil }
        rows.append(delivery)
        let mine = run.getProcess["settingsbus"] ?? Samples(), theirs = run.getProcess["dconf"] ?? Samples()
        rows.append(
            Row(
                measure: "GSettings: a `gsettings get` process, start to exit, p50 / p99", settingsBus: Format.percentiles(mine),
                dconf: dconfValue(Format.percentiles(theirs)), ratio: ratio(mine.p50, theirs.p50, "dconf"),
                target: "p50 ≤ 1.0× dconf's", met: mine.p50.flatMap { a in theirs.p50.map { a <= $0 } }))
        rows.append(
            Row(
                measure: "… with the broker stopped (`SIGSTOP`), p50 / p99",
                settingsBus: Format.percentiles(run.getProcessStopped)
                    + (run.getProcessStoppedWrong > 0
                        ? ", \(run.getProcessStoppedWrong) of \(run.getProcessStopped.count) read the schema's default" : ""),
                dconf: "—", ratio: ratio(run.getProcessStopped.p50, mine.p50, "running"), target: "p50 ≤ 1.1× running",
                met: run.getProcessStopped.p50.flatMap { a in mine.p50.map { a <= 1.1 * $0 } }))
        let python = run.pythonApp["settingsbus"] ?? Samples(), dconfPython = run.pythonApp["dconf"] ?? Samples()
        rows.append(
            Row(
                measure: "GSettings: a python3-gi app, `Gio.Settings.new` of 5 schemas and 50 reads, start to last read, "
                    + "p50 / p99" + (run.pythonMissing.map { " (\($0))" } ?? ""),
                settingsBus: Format.percentiles(python), dconf: dconfValue(Format.percentiles(dconfPython)),
                ratio: ratio(python.p50, dconfPython.p50, "dconf"), target: "p50 ≤ 1.0× dconf's",
                met: python.p50.flatMap { a in dconfPython.p50.map { a <= $0 } }))
        rows.append(
            Row(
                measure: "… with the broker stopped (`SIGSTOP`), p50 / p99", settingsBus: Format.percentiles(run.pythonAppStopped),
                dconf: "—", ratio: ratio(run.pythonAppStopped.p50, python.p50, "running"), target: "p50 ≤ 1.1× running",
                met: run.pythonAppStopped.p50.flatMap { a in python.p50.map { a <= 1.1 * $0 } }))
        let base = run.memory["memory"]
        rows.append(
            Row(
                measure: "GSettings: memory of a C app that loads GIO and reads a key, resident / private, "
                    + "with the backend (`memory`: \(residentAndPrivate(base)))",
                settingsBus: residentAndPrivate(run.memory["settingsbus"]),
                dconf: dconfValue(residentAndPrivate(run.memory["dconf"])),
                ratio: ratio(
                    run.memory["settingsbus"].map { Double($0.privateKiB) },
                    run.memory["dconf"].map { Double($0.privateKiB) }, "dconf (private)")))
        let added = { (backend: String) -> (resident: Int, private: Int)? in
            guard let base, let memory = run.memory[backend] else { return nil }
            return (memory.residentKiB - base.residentKiB, memory.privateKiB - base.privateKiB)
        }
        let addedText = { (backend: String) -> String in
            guard let added = added(backend) else { return "n/a" }
            return String(format: "%+.1f / %+.1f MiB", Double(added.resident) / 1024, Double(added.private) / 1024)
        }
        rows.append(
            Row(
                measure: "… what the backend adds over `memory`, resident / private", settingsBus: addedText("settingsbus"),
                dconf: dconfValue(addedText("dconf")),
                ratio: ratio(added("settingsbus").map { Double($0.private) }, added("dconf").map { Double($0.private) }, "dconf (private)")))
        return rows
    }

    private func residentAndPrivate(_ memory: ProcessMemory?) -> String {
        guard let memory else { return "n/a" }
        return String(format: "%.1f / %.1f MiB", Double(memory.residentKiB) / 1024, Double(memory.privateKiB) / 1024)
    }

    /// Sync across machines (dconf has no such thing).
    private func syncRows(_ sync: SyncRun) -> [Row] {
        var rows: [Row] = []
        let syncRatio = sync.syncDelivery.p50.flatMap { remote in sync.localDelivery.p50.map { remote / $0 } }
        rows.append(
            Row(
                measure: "sync: write on A → value in a stream on B, through PostgreSQL / on A's own bus, p50 / p99",
                settingsBus: "\(Format.percentiles(sync.syncDelivery)) / \(Format.percentiles(sync.localDelivery))",
                dconf: "—", ratio: "\(Format.ratio(sync.syncDelivery.p50, sync.localDelivery.p50)) local",
                target: "p50 ≤ 3× local", met: syncRatio.map { $0 <= 3 }))
        rows.append(
            Row(
                measure: "sync: a machine joining a database of \(count(sync.firstSyncKeys)): start → all in its store",
                settingsBus: Format.duration(sync.firstSync), dconf: "—"))
        for scale in [sync.listening, sync.polling].compactMap({ $0 }) {
            rows.append(
                Row(
                    measure: "sync, \(sync.machines) brokers \(scale.mode): one change → all others have it, p50 / max",
                    settingsBus: "\(Format.duration(scale.reachAll.p50)) / \(Format.duration(scale.reachAll.max))",
                    dconf: "—"))
            if let idle = scale.idle {
                rows.append(
                    Row(
                        measure: "… the server: most connections held; while quiet, per minute: CPU / transactions / "
                            + "sessions (mean length)",
                        settingsBus: String(
                            format: "%d; %.0f ms / %.0f / %.0f", scale.mostConnections, idle.cpuMillisecondsPerMinute,
                            idle.transactionsPerMinute, idle.sessionsPerMinute)
                            + (idle.meanSessionMilliseconds.map { String(format: " (%.1f ms)", $0) } ?? ""),
                        dconf: "—"))
            }
        }
        return rows
    }

    /// The memory of each service started on a store of `size` keys, each holding its data (the broker after its
    /// start, which reads the store; dconf-service after one write, which is when it reads its database):
    /// resident / proportional / private / anonymous, the ratio of the private figures, and the budget where there is one (the broker's
    /// resident memory with no keys; its private memory against dconf-service's from 10,000 keys up).
    private func idleMemoryRow(_ size: Int) -> Row {
        let mine = results.sizes[size]?.idle, theirs = results.dconfSizes[size]?.idle
        var row = Row(
            measure: "idle memory with \(count(size)): resident / proportional / private / anonymous, "
                + "broker vs dconf-service",
            settingsBus: Format.memoryBreakdown(mine), dconf: dconfValue(Format.memoryBreakdown(theirs)),
            ratio: ratio(mine.map { Double($0.privateKiB) }, theirs.map { Double($0.privateKiB) }, "dconf (private)"))
        if size == 0 {
            row.target = "broker resident ≤ 12 MiB (installed build)"
            row.met = mine.map { $0.residentKiB <= 12 * 1024 }
        } else if size >= 10_000 {
            row.target = "private ≤ 0.5× dconf-service's"
            if let mine, let theirs { row.met = Double(mine.privateKiB) <= 0.5 * Double(theirs.privateKiB) }
        }
        return row
    }

    private func halfOfDconf(_ measure: String, _ mine: Samples, _ theirs: Samples, target: Bool) -> Row {
        var row = Row(
            measure: measure, settingsBus: Format.percentiles(mine), dconf: dconfValue(Format.percentiles(theirs)),
            ratio: ratio(mine.p50, theirs.p50, "dconf"))
        if target {
            row.target = "p50 ≤ 0.5× dconf's"
            if let a = mine.p50, let b = theirs.p50 { row.met = a <= 0.5 * b }
        }
        return row
    }

    private func ratio(_ a: Double?, _ b: Double?, _ what: String) -> String {
        guard a != nil, b != nil else { return "—" }
        return "\(Format.ratio(a, b)) \(what)"
    }

    private func dconfValue(_ text: String) -> String { text }

    /// Whether a time is within 1.5× of another (a directory's read against the store's size).
    private func nearOne(_ a: Double?, _ b: Double?) -> Bool? {
        guard let a, let b else { return nil }
        return a <= 1.5 * b
    }

    private func messages(_ count: UInt32?) -> String {
        guard let count else { return " (bus messages not counted)" }
        return ", \(count) bus message\(count == 1 ? "" : "s")"
    }

    private func writerCell(_ run: WriterRun?) -> String {
        guard let run else { return "n/a" }
        var text = "\(Format.rate(run.writesPerSecond)), \(run.missing) of \(run.acknowledged) lost"
        if run.failed > 0 { text += ", \(run.failed) failed" }
        return text
    }

    private func count(_ keys: Int) -> String {
        switch keys {
        case 0: return "no keys"
        case 1: return "1 key"
        case let n where n % 1_000_000 == 0: return "\(n / 1_000_000)M keys"
        case let n where n % 1000 == 0: return "\(n / 1000)k keys"
        default: return "\(keys) keys"
        }
    }
}
