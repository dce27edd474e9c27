// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// What one watch knows (the local copy of the values below its location, the serial they are current at)
/// and how each event of the bus changes it: a value with no bus, no lock and no task.
///
/// ``WatchHub`` keeps one per watched location under its lock, tells it what happened, and does what it
/// answers: yields an update to the subscribers, hands a signal to the watch's task, or reads the location.
///
/// - ``connected()``: a subscription was made on a connection; then a read (``beginRead()``, and
///   ``snapshotRead(_:)`` or ``readFailed()``). A broker restart, and a retry of a failed read, are reads too.
/// - ``signalRead(_:)``: a `Changed` signal read on the connection's thread. It is recorded at once unless
///   something is ahead of it (the first read has not ended, a read is in flight, earlier signals wait for the
///   task, or the signal carries none of the location's values); then the task gets it, and every later
///   signal, until it has caught up, which keeps them in order.
/// - ``forwardedSignal(_:)``: the task takes a signal handed to it; a signal that carries none of the
///   location's values (a secret key's, or one of a commit too large for one signal) asks for a read, whose
///   result is ``forwardedRead(_:for:)``.
///
/// A signal whose serial is not newer than what the watch has delivered is dropped.
struct WatchState: Sendable {
    /// A `Changed` signal's update of the location (only the keys below it), with the signal's path and serial.
    struct Signal: Sendable, Hashable {
        var update: SettingsUpdate
        var path: String
        var serial: UInt64
    }

    /// What became of a signal.
    enum Outcome: Sendable, Hashable {
        /// Not newer than what the watch has delivered, or the watch has not read its values yet.
        case dropped
        /// The local copy is now at the signal's serial; the update, when there is one, goes to the subscribers.
        case recorded(SettingsUpdate?)
    }

    /// What to do with a signal read on the connection's thread.
    enum Arrival: Sendable, Hashable {
        case applied(Outcome)
        /// Hand it to the watch's task, which applies it after those ahead of it.
        case forward
    }

    /// What the watch's task does with a signal handed to it.
    enum TaskStep: Sendable, Hashable {
        case applied(Outcome)
        /// Read the location, then report the result with ``WatchState/forwardedRead(_:for:)``.
        case read
    }

    let location: SettingLocation
    /// The effective values below the location; a key that is absent has no value.
    private(set) var values: [SettingPath: DBusValue] = [:]
    /// The serial the values are current at.
    private(set) var delivered: UInt64 = 0
    /// Whether the first read has ended.
    private(set) var ready = false
    /// Signals handed to the task that it has not applied yet: while there are any, later signals go the same
    /// way, so that they are applied in order.
    private(set) var forwarded = 0
    /// Whether a read of the location is in flight (its snapshot may be older than a signal).
    private(set) var reading = false

    init(location: SettingLocation) {
        self.location = location
    }

    /// What a new subscriber gets first: every value and the serial; nil until the first read has ended.
    var snapshot: SettingsUpdate? {
        guard ready else { return nil }
        var removed: Set<SettingPath> = []
        if case .key(let key) = location, values[key] == nil { removed.insert(key) }
        return SettingsUpdate(kind: .snapshot, values: values, removed: removed, serial: delivered, origin: nil)
    }

    // MARK: - Connections and reads

    /// A subscription was made on a new connection, or the last one ended: nothing handed to a task and no
    /// read is in flight any more.
    mutating func connected() {
        forwarded = 0
        reading = false
    }

    /// A read of the location begins: signals wait for it (its snapshot may be older than they are).
    mutating func beginRead() {
        reading = true
    }

    /// The read failed; it is tried again later.
    mutating func readFailed() {
        reading = false
    }

    /// The read's values become the local copy.
    ///
    /// - Returns: the update for the subscribers: the snapshot the first time, afterwards a resync with what
    ///   differs (nil when nothing does).
    mutating func snapshotRead(_ read: SettingsSnapshot) -> SettingsUpdate? {
        reading = false
        guard ready else {
            ready = true
            values = read.values
            delivered = read.serial
            return snapshot
        }
        var update = SettingsUpdate(kind: .resync, values: [:], removed: [], serial: read.serial, origin: nil)
        for (key, value) in read.values where values[key] != value { update.values[key] = value }
        for key in values.keys where read.values[key] == nil { update.removed.insert(key) }
        values = read.values
        delivered = read.serial
        return update.values.isEmpty && update.removed.isEmpty ? nil : update
    }

    // MARK: - Signals

    /// A signal read on the connection's thread.
    mutating func signalRead(_ signal: Signal) -> Arrival {
        guard ready, !reading, forwarded == 0, !needsRead(signal) else {
            forwarded += 1
            return .forward
        }
        return .applied(record(signal.update, serial: signal.serial))
    }

    /// The task takes a signal handed to it, in the order they were read.
    mutating func forwardedSignal(_ signal: Signal) -> TaskStep {
        if needsRead(signal) { return .read }
        forwarded = max(0, forwarded - 1)
        return .applied(record(signal.update, serial: signal.serial))
    }

    /// The read a forwarded signal asked for has ended (`read` is nil when it failed).
    ///
    /// A key's signal that names the key as its path changed it; one that names a directory may not have:
    /// the key is reported only if it differs from the local copy. A directory's signal is completed with what
    /// differs, at the read's serial (signals up to it are in the read already). A read older than the
    /// signal is no answer: the signal is dropped (a later one, or a new owner of the broker's name, follows).
    mutating func forwardedRead(_ read: SettingsSnapshot?, for signal: Signal) -> Outcome {
        forwarded = max(0, forwarded - 1)
        guard let read, read.serial >= signal.serial else { return .dropped }
        var update = signal.update
        var serial = signal.serial
        switch location {
        case .key(let key):
            let value = read.values[key]
            if signal.path == key.rawValue || value != values[key] {
                if let value { update.values[key] = value } else { update.removed.insert(key) }
            }
        case .directory:
            for (key, value) in read.values where values[key] != value { update.values[key] = value }
            for key in values.keys where read.values[key] == nil { update.removed.insert(key) }
            serial = read.serial
            update.serial = serial
        }
        return record(update, serial: serial)
    }

    /// Whether a signal carries nothing for the location (a secret key's change, or a commit too large for one
    /// signal, which names only a directory): the location must be read.
    private func needsRead(_ signal: Signal) -> Bool {
        signal.update.values.isEmpty && signal.update.removed.isEmpty
    }

    /// Records an update in the local copy, unless it is not newer.
    private mutating func record(_ update: SettingsUpdate, serial: UInt64) -> Outcome {
        guard ready, serial > delivered else { return .dropped }
        delivered = serial
        for (key, value) in update.values { values[key] = value }
        for key in update.removed { values[key] = nil }
        return .recorded(update.values.isEmpty && update.removed.isEmpty ? nil : update)
    }
}

/// The serials of this process's own writes: a watch's local copy serves reads of a key only once it is at
/// least as new as the last write of this process that touched it, so a process always reads its own writes.
/// A value with no bus and no lock; ``WatchHub`` keeps it beside the watches.
struct WriteFloors: Sendable {
    private(set) var serials: [SettingLocation: UInt64] = [:]

    var isEmpty: Bool { serials.isEmpty }

    /// Records a write committed at `serial` that touched `locations`, where a watch that overlaps one of them
    /// has not delivered that serial yet.
    ///
    /// - Parameter watches: each watched location and the serial its copy is current at.
    mutating func noteWrite(
        of locations: some Sequence<SettingLocation>, serial: UInt64,
        watches: some Collection<(location: SettingLocation, delivered: UInt64)>
    ) {
        for location in locations {
            let caughtUp = watches.allSatisfy { watch in
                !Self.overlaps(watch.location, location) || watch.delivered >= serial
            }
            if !caughtUp { serials[location] = max(serials[location] ?? 0, serial) }
        }
    }

    /// The serial a copy must be at to serve `key`: 0 when this process has no write to it pending.
    func floor(for key: SettingPath) -> UInt64 {
        var floor: UInt64 = 0
        for (location, serial) in serials where serial > floor && location.contains(key) { floor = serial }
        return floor
    }

    /// Forgets the floors every watch that overlaps them has caught up with.
    mutating func prune(watches: some Collection<(location: SettingLocation, delivered: UInt64)>) {
        guard !serials.isEmpty else { return }
        serials = serials.filter { location, serial in
            watches.contains { watch in Self.overlaps(watch.location, location) && watch.delivered < serial }
        }
    }

    static func overlaps(_ a: SettingLocation, _ b: SettingLocation) -> Bool {
        switch (a, b) {
        case (.key(let x), .key(let y)): return x == y
        case (.directory(let d), .key(let k)), (.key(let k), .directory(let d)): return d.contains(k)
        case (.directory(let x), .directory(let y)): return x.contains(y) || y.contains(x)
        }
    }
}
