// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

@testable import SettingsBus
import TestMachine

/// The state of one watch and its transitions, without a bus: which signals are recorded at once, which wait
/// for the watch's task, which are dropped, and what the subscribers are told.
@Suite(.sharingTheMachine) struct WatchStateTests {
    static let theme = try! SettingPath("/org/example/theme")
    static let size = try! SettingPath("/org/example/size")
    static let other = try! SettingPath("/org/other/key")
    static let directory = try! SettingDirectory("/org/example/")

    static func signal(
        _ serial: UInt64, _ values: [SettingPath: DBusValue] = [:], removed: Set<SettingPath> = [],
        path: String? = nil
    ) -> WatchState.Signal {
        let path = path ?? SettingLocation.enclosing(Array(values.keys) + Array(removed))?.rawValue ?? "/org/"
        return WatchState.Signal(
            update: SettingsUpdate(kind: .change, values: values, removed: removed, serial: serial, origin: ":1.7"),
            path: path, serial: serial)
    }

    static func snapshot(_ serial: UInt64, _ values: [SettingPath: DBusValue]) -> SettingsSnapshot {
        SettingsSnapshot(values: values, serial: serial)
    }

    /// A key's watch that has read `value` at `serial`.
    static func readyKey(_ serial: UInt64 = 10, _ value: DBusValue = .string("light")) -> WatchState {
        var state = WatchState(location: .key(theme))
        state.connected()
        state.beginRead()
        _ = state.snapshotRead(snapshot(serial, [theme: value]))
        return state
    }

    static func recorded(_ update: SettingsUpdate?) -> WatchState.Arrival { .applied(.recorded(update)) }

    @Test func theFirstReadIsTheSnapshotAndNewSubscribersGetIt() {
        var state = WatchState(location: .key(Self.theme))
        #expect(state.snapshot == nil)
        state.connected()
        state.beginRead()
        let first = state.snapshotRead(Self.snapshot(10, [:]))
        let expected = SettingsUpdate(kind: .snapshot, values: [:], removed: [Self.theme], serial: 10, origin: nil)
        #expect(first == expected)
        #expect(state.snapshot == expected)
        #expect(state.ready && !state.reading && state.delivered == 10)
    }

    @Test func signalsAreRecordedInSerialOrderAndStaleOnesDropped() {
        var state = Self.readyKey(10)
        let newer = Self.signal(11, [Self.theme: .string("dark")])
        #expect(state.signalRead(newer) == Self.recorded(newer.update))
        #expect(state.values[Self.theme] == .string("dark"))
        // Not newer than what was delivered: the read at 10 and the signal at 11 have it.
        #expect(state.signalRead(Self.signal(11, [Self.theme: .string("old")])) == .applied(.dropped))
        #expect(state.signalRead(Self.signal(9, [Self.theme: .string("older")])) == .applied(.dropped))
        #expect(state.values[Self.theme] == .string("dark"))
        let removal = Self.signal(12, removed: [Self.theme])
        #expect(state.signalRead(removal) == Self.recorded(removal.update))
        #expect(state.values[Self.theme] == nil && state.delivered == 12)
    }

    @Test func aSignalBeforeTheFirstReadWaitsForTheTaskAndTheReadDecides() {
        var state = WatchState(location: .key(Self.theme))
        state.connected()
        state.beginRead()
        let early = Self.signal(5, [Self.theme: .string("dark")])
        #expect(state.signalRead(early) == .forward)
        #expect(state.snapshotRead(Self.snapshot(7, [Self.theme: .string("light")]))?.kind == .snapshot)
        // The task applies it after the read: older than the read, so it is dropped, and the forwarding ends.
        #expect(state.forwardedSignal(early) == .applied(.dropped))
        #expect(state.forwarded == 0)
        let next = Self.signal(8, [Self.theme: .string("dark")])
        #expect(state.signalRead(next) == Self.recorded(next.update))
    }

    @Test func aSignalWhileARereadIsInFlightWaitsAndKeepsItsOrder() {
        var state = Self.readyKey(10)
        // A broker restart: read again. Signals read meanwhile go to the task, and so do those after them.
        state.beginRead()
        let during = Self.signal(12, [Self.theme: .string("dark")])
        let after = Self.signal(13, [Self.theme: .string("blue")])
        #expect(state.signalRead(during) == .forward)
        let resync = state.snapshotRead(Self.snapshot(11, [Self.theme: .string("grey")]))
        #expect(resync == SettingsUpdate(kind: .resync, values: [Self.theme: .string("grey")], removed: [], serial: 11, origin: nil))
        // The read has ended, but a signal is still waiting for the task: this one must follow it.
        #expect(state.signalRead(after) == .forward)
        #expect(state.forwarded == 2)
        #expect(state.forwardedSignal(during) == .applied(.recorded(during.update)))
        #expect(state.forwardedSignal(after) == .applied(.recorded(after.update)))
        #expect(state.forwarded == 0 && state.delivered == 13 && state.values[Self.theme] == .string("blue"))
        let later = Self.signal(14, [Self.theme: .string("red")])
        #expect(state.signalRead(later) == Self.recorded(later.update))
    }

    @Test func aSignalOlderThanAnInFlightRereadIsDroppedAfterIt() {
        var state = Self.readyKey(10)
        state.beginRead()
        let stale = Self.signal(11, [Self.theme: .string("dark")])
        #expect(state.signalRead(stale) == .forward)
        #expect(state.snapshotRead(Self.snapshot(12, [Self.theme: .string("blue")]))?.serial == 12)
        #expect(state.forwardedSignal(stale) == .applied(.dropped))
        #expect(state.values[Self.theme] == .string("blue"))
    }

    @Test func aResyncThatFindsNothingNewTellsNobody() {
        var state = Self.readyKey(10)
        state.beginRead()
        #expect(state.snapshotRead(Self.snapshot(10, [Self.theme: .string("light")])) == nil)
        state.beginRead()
        state.readFailed()
        #expect(!state.reading)
        let next = Self.signal(11, [Self.theme: .string("dark")])
        #expect(state.signalRead(next) == Self.recorded(next.update))
    }

    @Test func aDirectorySignalWithNoValuesIsReadAndReportsWhatDiffersAtTheReadsSerial() {
        var state = WatchState(location: .directory(Self.directory))
        state.connected()
        state.beginRead()
        _ = state.snapshotRead(Self.snapshot(10, [Self.theme: .string("light"), Self.size: .int32(11)]))
        // A commit too large for one signal: the signal names the directory and carries no values.
        let tooBig = Self.signal(12, path: Self.directory.rawValue)
        #expect(state.signalRead(tooBig) == .forward)
        // Signals after it wait for it.
        let after = Self.signal(14, [Self.size: .int32(14)])
        #expect(state.signalRead(after) == .forward)
        #expect(state.forwardedSignal(tooBig) == .read)
        let outcome = state.forwardedRead(Self.snapshot(13, [Self.theme: .string("dark")]), for: tooBig)
        var expected = tooBig.update
        expected.values = [Self.theme: .string("dark")]
        expected.removed = [Self.size]
        expected.serial = 13
        #expect(outcome == .recorded(expected))
        #expect(state.delivered == 13)
        #expect(state.forwardedSignal(after) == .applied(.recorded(after.update)))
        #expect(state.forwarded == 0 && state.values == [Self.theme: .string("dark"), Self.size: .int32(14)])
    }

    @Test func aReadOlderThanTheSignalItWasForIsNoAnswer() {
        var state = WatchState(location: .directory(Self.directory))
        state.connected()
        state.beginRead()
        _ = state.snapshotRead(Self.snapshot(10, [Self.theme: .string("light")]))
        let tooBig = Self.signal(12, path: Self.directory.rawValue)
        #expect(state.signalRead(tooBig) == .forward)
        #expect(state.forwardedSignal(tooBig) == .read)
        #expect(state.forwardedRead(Self.snapshot(11, [:]), for: tooBig) == .dropped)
        #expect(state.forwardedRead(nil, for: tooBig) == .dropped)
        #expect(state.forwarded == 0 && state.delivered == 10 && state.values[Self.theme] == .string("light"))
    }

    @Test func aSecretKeysSignalIsReadAndReportedWhenItNamesTheKeyOrTheValueDiffers() {
        // Alone in its commit, a secret key's change names the key as its path: reported even if equal.
        var state = Self.readyKey(10, .string("s3cret"))
        let alone = Self.signal(11, path: Self.theme.rawValue)
        #expect(state.signalRead(alone) == .forward)
        #expect(state.forwardedSignal(alone) == .read)
        var expected = alone.update
        expected.values = [Self.theme: .string("s3cret")]
        #expect(state.forwardedRead(Self.snapshot(11, [Self.theme: .string("s3cret")]), for: alone) == .recorded(expected))
        // With other keys, the signal names their directory: reported only if it differs.
        let shared = Self.signal(12, path: Self.directory.rawValue)
        #expect(state.signalRead(shared) == .forward)
        #expect(state.forwardedSignal(shared) == .read)
        #expect(state.forwardedRead(Self.snapshot(12, [Self.theme: .string("s3cret")]), for: shared) == .recorded(nil))
        #expect(state.delivered == 12)
        let removed = Self.signal(13, path: Self.directory.rawValue)
        #expect(state.signalRead(removed) == .forward)
        #expect(state.forwardedSignal(removed) == .read)
        var expectedRemoval = removed.update
        expectedRemoval.removed = [Self.theme]
        #expect(state.forwardedRead(Self.snapshot(13, [:]), for: removed) == .recorded(expectedRemoval))
        #expect(state.forwarded == 0)
    }

    @Test func aBrokerRestartReportsWhatChangedMeanwhile() {
        var state = WatchState(location: .directory(Self.directory))
        state.connected()
        state.beginRead()
        _ = state.snapshotRead(Self.snapshot(10, [Self.theme: .string("light"), Self.size: .int32(11)]))
        // The connection ends and another is made; the watch reads again.
        state.connected()
        state.beginRead()
        let resync = state.snapshotRead(Self.snapshot(15, [Self.theme: .string("light"), Self.other: .int32(1)]))
        #expect(resync == SettingsUpdate(kind: .resync, values: [Self.other: .int32(1)], removed: [Self.size], serial: 15, origin: nil))
        #expect(state.delivered == 15)
    }

    @Test func aNewConnectionForgetsSignalsHandedToTheOldOnesTask() {
        var state = Self.readyKey(10)
        state.beginRead()
        #expect(state.signalRead(Self.signal(11, [Self.theme: .string("dark")])) == .forward)
        state.connected()
        #expect(state.forwarded == 0 && !state.reading)
    }

    @Test func ownWritesSetFloorsUntilEveryOverlappingWatchHasCaughtUp() {
        var floors = WriteFloors()
        let watches: [(location: SettingLocation, delivered: UInt64)] = [
            (.key(Self.theme), 10), (.directory(Self.directory), 10),
        ]
        // A write no watch overlaps needs no floor.
        floors.noteWrite(of: [.key(Self.other)], serial: 11, watches: watches)
        #expect(floors.isEmpty)
        // A write at 12 to a watched key: its copies serve it only once they are at 12.
        floors.noteWrite(of: [.key(Self.theme)], serial: 12, watches: watches)
        #expect(floors.floor(for: Self.theme) == 12)
        #expect(floors.floor(for: Self.size) == 0)
        // A reset of the directory covers every key in it.
        floors.noteWrite(of: [.directory(Self.directory)], serial: 13, watches: watches)
        #expect(floors.floor(for: Self.size) == 13 && floors.floor(for: Self.theme) == 13)
        // The key's watch catches up, the directory's has not.
        floors.prune(watches: [(.key(Self.theme), 13), (.directory(Self.directory), 12)])
        #expect(floors.floor(for: Self.theme) == 13)
        floors.prune(watches: [(.key(Self.theme), 13), (.directory(Self.directory), 13)])
        #expect(floors.isEmpty)
        // Watches already at the write's serial need no floor.
        floors.noteWrite(of: [.key(Self.theme)], serial: 13, watches: [(.key(Self.theme), 13)])
        #expect(floors.isEmpty)
    }
}
