// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel
import Glibc

/// The version of one write of a synced key: a hybrid logical clock and the machine that wrote it.
///
/// Newest wins: versions are ordered by ``clock``, then by ``machine`` (byte order), so every machine picks
/// the same winner.
public struct SyncVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// 48 bits of milliseconds since 1970, then a 16-bit counter (``HybridLogicalClock``).
    public var clock: UInt64
    /// The id of the machine that wrote it.
    public var machine: String

    /// Makes a version.
    public init(clock: UInt64, machine: String) {
        self.clock = clock
        self.machine = machine
    }

    public static func < (a: SyncVersion, b: SyncVersion) -> Bool {
        a.clock != b.clock ? a.clock < b.clock : Array(a.machine.utf8).lexicographicallyPrecedes(b.machine.utf8)
    }

    /// The milliseconds part of ``clock``.
    public var milliseconds: UInt64 { clock >> 16 }

    public var description: String { "\(milliseconds).\(clock & 0xffff)@\(machine)" }
}

/// A hybrid logical clock: 48 bits of milliseconds since 1970 and a 16-bit counter, never behind the wall
/// clock nor behind any clock it has seen.
///
/// ``tick(now:)`` gives the clock of a local write; ``observe(_:now:)`` moves it past a remote version. Both
/// are the usual send and receive rules: the larger of the wall clock and the last value, plus one in the
/// counter when the wall clock has not moved on.
public final class HybridLogicalClock: Sendable {
    private let last = Locked<UInt64>(0)
    /// Added to the wall clock (tests stand for a machine whose clock is wrong).
    let offsetMilliseconds: Int64

    /// Makes a clock that starts at `last` (a clock read back from the store).
    ///
    /// - Parameter offsetMilliseconds: added to the wall clock, to test a machine whose clock is wrong.
    public init(last: UInt64 = 0, offsetMilliseconds: Int64 = 0) {
        self.offsetMilliseconds = offsetMilliseconds
        self.last.withLock { $0 = last }
    }

    /// The largest clock: all 48 bits of milliseconds and all 16 of the counter.
    public static let largest = UInt64.max

    /// The wall clock with the offset (never below zero nor past the 48 bits of milliseconds).
    public func now() -> UInt64 {
        let (wall, overflow) = Int64(Self.wallClock() >> 16).addingReportingOverflow(offsetMilliseconds)
        let milliseconds = overflow ? (offsetMilliseconds < 0 ? 0 : Int64.max) : wall
        return UInt64(min(max(0, milliseconds), 0xffff_ffff_ffff)) << 16
    }

    /// The wall clock in the clock's format (counter 0).
    public static func wallClock() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        let millis = UInt64(max(0, spec.tv_sec)) * 1000 + UInt64(max(0, spec.tv_nsec)) / 1_000_000
        return (millis & 0xffff_ffff_ffff) << 16
    }

    /// The clock of a new local event. It never traps: a clock at ``largest`` (which only a clock read from a
    /// damaged store can be) stays there.
    public func tick() -> UInt64 {
        let now = now()
        return last.withLock { last in
            last = max(now, last == Self.largest ? last : last + 1)
            return last
        }
    }

    /// Moves the clock past a clock seen in a remote version.
    public func observe(_ remote: UInt64) {
        let now = now()
        last.withLock { last in last = max(last, remote, now) }
    }

    /// The last clock given or seen.
    public var current: UInt64 { last.withLock { $0 } }
}

/// One change of a synced key: its new user value (nil for a reset, a tombstone) and its version.
public struct SyncChange: Sendable, Hashable {
    /// The key.
    public var key: SettingPath
    /// The new user value, nil for a reset.
    public var value: DBusValue?
    /// The version of the change.
    public var version: SyncVersion

    /// Makes a change.
    public init(key: SettingPath, value: DBusValue?, version: SyncVersion) {
        self.key = key
        self.value = value
        self.version = version
    }
}
