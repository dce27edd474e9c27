// SPDX-License-Identifier: Apache-2.0

import Foundation
internal import Glibc

/// A process's parent and CPU time so far, from `/proc/PID/stat`: for tests and the benchmark that check what
/// a broker or a server costs while it should be quiet.
public struct ProcessTimes: Sendable {
    /// The parent's pid.
    public var parent: Int32
    /// Its own CPU time (`utime` + `stime`), in milliseconds.
    public var ownMilliseconds: Double
    /// The CPU time of its ended children that it waited for (`cutime` + `cstime`), in milliseconds.
    public var endedChildrenMilliseconds: Double

    /// Reads a process's times; nil when it has ended or cannot be read.
    public static func read(_ pid: Int32) -> ProcessTimes? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // After "pid (comm) ": state, ppid, … utime is field 14, stime 15, cutime 16, cstime 17.
        let fields = text[text.index(close, offsetBy: 2)...].split(separator: " ")
        guard fields.count > 14, let parent = Int32(fields[1]) else { return nil }
        let ticks = fields[11...14].map { Double($0) ?? 0 }
        let perTick = 1000 / Double(sysconf(Int32(_SC_CLK_TCK)))
        return ProcessTimes(
            parent: parent, ownMilliseconds: (ticks[0] + ticks[1]) * perTick,
            endedChildrenMilliseconds: (ticks[2] + ticks[3]) * perTick)
    }

    /// The pids of the running processes.
    public static func runningPids() -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }
    }
}
