// SPDX-License-Identifier: Apache-2.0

import Foundation
internal import Glibc

/// The system-wide monotonic clock (`CLOCK_MONOTONIC`) in nanoseconds: the same clock in every process,
/// so a time taken in one process can be subtracted from a time taken in another.
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Durations in nanoseconds, with percentiles.
struct Samples: Sendable {
    private(set) var values: [Double] = []

    var count: Int { values.count }
    var isEmpty: Bool { values.isEmpty }

    mutating func append(_ nanoseconds: Double) {
        values.append(nanoseconds)
    }

    mutating func append(since start: UInt64) {
        values.append(Double(monotonicNanoseconds() &- start))
    }

    /// The percentile `p` (0...100), nearest rank; nil without samples.
    func percentile(_ p: Double) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return sorted[Swift.min(Swift.max(rank, 0), sorted.count - 1)]
    }

    var p50: Double? { percentile(50) }
    var p99: Double? { percentile(99) }
    var max: Double? { values.max() }
}

/// Runs `body` for each index until `count` runs or `seconds` have passed, whichever comes first.
///
/// - Returns: how many runs were made.
@discardableResult
func boundedLoop(
    count: Int, seconds: Double, _ body: (Int) async throws -> Void
) async rethrows -> Int {
    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
    var index = 0
    while index < count, monotonicNanoseconds() < deadline {
        try await body(index)
        index += 1
    }
    return index
}

/// Human-readable durations and rates for the report.
enum Format {
    /// A duration in nanoseconds, in ns, µs, ms or s.
    static func duration(_ nanoseconds: Double?) -> String {
        guard let nanoseconds else { return "n/a" }
        switch nanoseconds {
        case ..<1_000: return String(format: "%.0f ns", nanoseconds)
        case ..<10_000: return String(format: "%.2f µs", nanoseconds / 1e3)
        case ..<1_000_000: return String(format: "%.0f µs", nanoseconds / 1e3)
        case ..<10_000_000: return String(format: "%.2f ms", nanoseconds / 1e6)
        case ..<1_000_000_000: return String(format: "%.0f ms", nanoseconds / 1e6)
        default: return String(format: "%.2f s", nanoseconds / 1e9)
        }
    }

    /// A p50 / p99 pair.
    static func percentiles(_ samples: Samples?) -> String {
        guard let samples, !samples.isEmpty else { return "n/a" }
        return "\(duration(samples.p50)) / \(duration(samples.p99))"
    }

    /// A p50 / p99 / max triple.
    static func percentilesAndMax(_ samples: Samples?) -> String {
        guard let samples, !samples.isEmpty else { return "n/a" }
        return "\(duration(samples.p50)) / \(duration(samples.p99)) / \(duration(samples.max))"
    }

    /// A ratio `a / b`, such as `0.42×`.
    static func ratio(_ a: Double?, _ b: Double?) -> String {
        guard let a, let b, b > 0 else { return "—" }
        let value = a / b
        if value >= 10 { return String(format: "%.0f×", value) }
        return value >= 0.1 ? String(format: "%.2f×", value) : String(format: "%.3f×", value)
    }

    /// Kibibytes as MiB.
    static func memory(_ kibibytes: Int?) -> String {
        guard let kibibytes else { return "n/a" }
        return String(format: "%.1f MiB", Double(kibibytes) / 1024)
    }

    /// A rate per second.
    static func rate(_ perSecond: Double?) -> String {
        guard let perSecond else { return "n/a" }
        return perSecond >= 100 ? String(format: "%.0f/s", perSecond) : String(format: "%.1f/s", perSecond)
    }
}

/// Writes a progress line to standard error.
func progress(_ line: String) {
    FileHandle.standardError.write(Data("settings-bench: \(line)\n".utf8))
}
