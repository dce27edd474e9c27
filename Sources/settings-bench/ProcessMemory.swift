// SPDX-License-Identifier: Apache-2.0

import Foundation

/// A process's memory, from `/proc/<pid>/smaps_rollup` (the sums of `/proc/<pid>/smaps` over all its mappings),
/// in KiB.
///
/// Resident memory counts every page the process has in RAM, shared ones whole (what `VmRSS` says);
/// proportional memory divides each shared page by the number of processes that map it, so it depends on what
/// else runs on the machine; private memory is what no other process maps: what ending the process would give
/// back.
struct ProcessMemory: Sendable {
    /// `Rss`: resident pages, shared ones counted whole.
    var residentKiB: Int
    /// `Pss`: resident pages, each shared page divided among the processes that map it.
    var proportionalKiB: Int
    /// `Private_Clean + Private_Dirty`: resident pages that no other process maps.
    var privateKiB: Int
    /// `Anonymous`: resident pages backed by no file (heap, stacks, copied-on-write data).
    var anonymousKiB: Int

    /// Reads the memory of process `pid` once it is at rest (``waitUntilAtRest(pid:timeLimit:)``): what a
    /// service holds between calls, after the work it does on its own after its first answer (the broker reads
    /// GNOME's schema sources then).
    static func readAtRest(pid: Int32) async -> ProcessMemory? {
        await waitUntilAtRest(pid: pid)
        return read(pid: pid)
    }

    /// Waits until process `pid` used no CPU time over 200 ms (`utime` + `stime` of `/proc/<pid>/stat`, in clock
    /// ticks), or `timeLimit` passed, or the process ended.
    static func waitUntilAtRest(pid: Int32, timeLimit: Duration = .seconds(10)) async {
        let clock = ContinuousClock()
        let deadline = clock.now + timeLimit
        var last = cpuTicks(pid: pid)
        while last != nil, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(200))
            let now = cpuTicks(pid: pid)
            if now == last { return }
            last = now
        }
    }

    /// The CPU time process `pid` used, in clock ticks; nil when it has ended.
    static func cpuTicks(pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = text.lastIndex(of: ")")
        else { return nil }
        // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let fields = text[text.index(after: end)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }

    /// Reads the memory of process `pid`; nil when it has ended or the kernel has no `smaps_rollup` (before
    /// Linux 4.14).
    static func read(pid: Int32) -> ProcessMemory? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else {
            return nil
        }
        return parse(text)
    }

    /// Reads the fields of a `smaps_rollup` text (`Name:   1234 kB` lines); nil when one is missing.
    static func parse(_ text: String) -> ProcessMemory? {
        var fields: [Substring: Int] = [:]
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let words = line[line.index(after: colon)...].split(separator: " ")
            guard words.count == 2, words[1] == "kB", let kibibytes = Int(words[0]) else { continue }
            fields[line[..<colon]] = kibibytes
        }
        guard let resident = fields["Rss"], let proportional = fields["Pss"], let clean = fields["Private_Clean"],
            let dirty = fields["Private_Dirty"], let anonymous = fields["Anonymous"]
        else { return nil }
        return ProcessMemory(
            residentKiB: resident, proportionalKiB: proportional, privateKiB: clean + dirty, anonymousKiB: anonymous)
    }
}

extension Format {
    /// Resident / proportional / private / anonymous memory, in MiB.
    static func memoryBreakdown(_ memory: ProcessMemory?) -> String {
        guard let memory else { return "n/a" }
        let figures = [memory.residentKiB, memory.proportionalKiB, memory.privateKiB, memory.anonymousKiB]
        return figures.map { String(format: "%.1f", Double($0) / 1024) }.joined(separator: " / ") + " MiB"
    }
}
