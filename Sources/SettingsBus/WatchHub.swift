// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The watches of a ``BusSettingsStore``: one bus subscription per watched key or directory, shared by
/// every stream of it, and the local copy of the watched values that makes reads free.
///
/// A watch subscribes to the broker's `Changed` signal with `arg0path` set to its location and `sender`
/// set to the broker's name (so the bus daemon wakes this process only for changes it asked for, and a
/// signal forged by another peer never matches), and only then reads the current values, so nothing falls
/// between the read and the first signal. Signals whose serial is not newer than what the watch has
/// delivered are dropped. When the broker's name gets a new owner (a restart), the watch reads again and
/// reports what changed meanwhile; when the connection is lost, it reconnects.
///
/// All state is behind one lock; updates are yielded to subscribers under it, so each subscriber sees them
/// in serial order, and the local copy is updated before any subscriber hears of a change.
final class WatchHub: Sendable {
    private struct Watch {
        var subscribers: [UInt64: UpdateChannel] = [:]
        /// The effective values below the location; a key that is absent has no value.
        var values: [SettingPath: DBusValue] = [:]
        /// The serial the values are current at.
        var delivered: UInt64 = 0
        var ready = false
        var task: Task<Void, Never>?
        /// Signals handed to the follow task that it has not applied yet: while there are any, later signals
        /// go the same way, so that they are applied in order.
        var forwarded = 0
        /// Whether the follow task is reading the location again (its snapshot may be older than a signal).
        var reading = false
    }

    private struct State {
        /// Every write goes through ``setWatch(_:at:)`` or ``withWatch(at:_:)``, which keep ``keyIndex`` current.
        private(set) var watches: [SettingLocation: Watch] = [:]
        /// The value and serial of each key watched by itself and ready: what ``cachedValue(of:)`` reads
        /// with one lookup, without copying a watch out of ``watches``.
        private(set) var keyIndex: [SettingPath: (value: DBusValue?, serial: UInt64)] = [:]
        var directoryWatches = 0
        /// Serials of this process's own writes: a local copy serves reads of a key only once it is at least
        /// this new, so a process always reads its own writes.
        var floors: [SettingLocation: UInt64] = [:]
        var nextID: UInt64 = 0
        var closed = false

        mutating func setWatch(_ watch: Watch?, at location: SettingLocation) {
            watches[location] = watch
            index(watch, at: location)
        }

        /// Changes the watch at `location` in place (its values are not copied) and keeps ``keyIndex``
        /// current; nil when there is no watch there.
        mutating func withWatch<Result>(at location: SettingLocation, _ body: (inout Watch) -> Result) -> Result? {
            guard let position = watches.index(forKey: location) else { return nil }
            // The index entry is read in the same access: passing the watch on would copy it (and retain each
            // of its fields).
            var entry: (value: DBusValue?, serial: UInt64)?
            func change(_ watch: inout Watch) -> Result {
                let result = body(&watch)
                if case .key(let key) = location, watch.ready { entry = (watch.values[key], watch.delivered) }
                return result
            }
            let result = change(&watches.values[position])
            if case .key(let key) = location { keyIndex[key] = entry }
            return result
        }

        /// Brings ``keyIndex`` up to date with the watch now at `location`.
        private mutating func index(_ watch: Watch?, at location: SettingLocation) {
            guard case .key(let key) = location else { return }
            if let watch, watch.ready {
                keyIndex[key] = (watch.values[key], watch.delivered)
            } else {
                keyIndex[key] = nil
            }
        }

        mutating func removeAllWatches() {
            watches = [:]
            keyIndex = [:]
        }
    }

    private enum Event: Sendable {
        case signal(DBusMessage)
        case brokerStarted
        case retry
        case ended
    }

    let link: BrokerLink
    private let state = Locked(State())

    init(link: BrokerLink) {
        self.link = link
    }

    // MARK: - Subscribing

    func updates(of location: SettingLocation, keepingNewest count: Int? = nil) -> SettingsUpdates {
        let channel = UpdateChannel(keepingNewest: count)
        let id: UInt64? = state.withLock { state in
            guard !state.closed else { return nil }
            let id = state.nextID
            state.nextID += 1
            var watch = state.watches[location] ?? Watch()
            if watch.task == nil {
                if case .directory = location { state.directoryWatches += 1 }
                watch.task = Task { [weak self] in await self?.run(location) }
            }
            watch.subscribers[id] = channel
            if watch.ready { channel.yield(Self.snapshot(of: watch, at: location)) }
            state.setWatch(watch, at: location)
            return id
        }
        guard let id else {
            channel.finish()
            return SettingsUpdates(channel)
        }
        channel.setOnTermination { [weak self] in self?.unsubscribe(id, from: location) }
        return SettingsUpdates(channel)
    }

    private func unsubscribe(_ id: UInt64, from location: SettingLocation) {
        let task: Task<Void, Never>? = state.withLock { state in
            guard var watch = state.watches[location] else { return nil }
            watch.subscribers[id] = nil
            guard watch.subscribers.isEmpty else {
                state.setWatch(watch, at: location)
                return nil
            }
            state.setWatch(nil, at: location)
            if case .directory = location { state.directoryWatches -= 1 }
            return watch.task
        }
        task?.cancel()
    }

    /// Ends every watch; later subscriptions end at once.
    func close() {
        let (tasks, channels) = state.withLock { state in
            state.closed = true
            defer { state.removeAllWatches() }
            return (state.watches.values.compactMap(\.task), state.watches.values.flatMap(\.subscribers.values))
        }
        for task in tasks { task.cancel() }
        for channel in channels { channel.finish() }
    }

    private static func snapshot(of watch: Watch, at location: SettingLocation) -> SettingsUpdate {
        var removed: Set<SettingPath> = []
        if case .key(let key) = location, watch.values[key] == nil { removed.insert(key) }
        return SettingsUpdate(kind: .snapshot, values: watch.values, removed: removed, serial: watch.delivered, origin: nil)
    }

    // MARK: - The local copy

    func cachedValue(of key: SettingPath) -> CachedSetting? {
        state.withLock { state in
            // The common case: the key is watched by itself and this process has no write it waits for.
            if state.floors.isEmpty, let entry = state.keyIndex[key] {
                return CachedSetting(value: entry.value, serial: entry.serial)
            }
            var floor: UInt64 = 0
            for (location, serial) in state.floors where serial > floor && location.contains(key) { floor = serial }
            if let watch = state.watches[.key(key)], watch.ready, watch.delivered >= floor {
                return CachedSetting(value: watch.values[key], serial: watch.delivered)
            }
            guard state.directoryWatches > 0 else { return nil }
            for (location, watch) in state.watches where watch.ready && watch.delivered >= floor {
                if case .directory(let directory) = location, directory.contains(key) {
                    return CachedSetting(value: watch.values[key], serial: watch.delivered)
                }
            }
            return nil
        }
    }

    /// Records a write of this process, committed at `serial`, so the local copy serves the keys it touched
    /// only once it has caught up with it.
    func noteWrite(_ transaction: SettingsTransaction, serial: UInt64) {
        state.withLock { state in
            guard !state.watches.isEmpty else { return }
            let watches = state.watches
            func caughtUp(_ location: SettingLocation) -> Bool {
                watches.allSatisfy { watched, watch in !Self.overlaps(watched, location) || watch.delivered >= serial }
            }
            for key in transaction.sets.keys where !caughtUp(.key(key)) {
                state.floors[.key(key)] = max(state.floors[.key(key)] ?? 0, serial)
            }
            for location in transaction.resets where !caughtUp(location) {
                state.floors[location] = max(state.floors[location] ?? 0, serial)
            }
        }
    }

    private static func overlaps(_ a: SettingLocation, _ b: SettingLocation) -> Bool {
        switch (a, b) {
        case (.key(let x), .key(let y)): return x == y
        case (.directory(let d), .key(let k)), (.key(let k), .directory(let d)): return d.contains(k)
        case (.directory(let x), .directory(let y)): return x.contains(y) || y.contains(x)
        }
    }

    /// Forgets floors that every watch has caught up with.
    private static func pruneFloors(_ state: inout State) {
        guard !state.floors.isEmpty else { return }
        state.floors = state.floors.filter { location, serial in
            state.watches.contains { watched, watch in overlaps(watched, location) && watch.delivered < serial }
        }
    }

    // MARK: - Following the broker

    private func run(_ location: SettingLocation) async {
        var failures = 0
        while !Task.isCancelled {
            do throws(SettingsError) {
                let connection = try await link.connection()
                try await follow(location, on: connection)
                failures = 0
            } catch {
                failures += 1
            }
            // The connection ended or could not be made: try again, soon at first, then every 2 s.
            let delay = min(2000, 25 << min(failures, 7))
            do { try await Task.sleep(for: .milliseconds(delay)) } catch { return }
        }
    }

    /// Subscribes on one connection, reads, and applies signals until the connection ends.
    private func follow(_ location: SettingLocation, on connection: DBusConnection) async throws(SettingsError) {
        var rule = MatchRule(
            sender: link.busName, interface: SettingsBusNames.interface, member: Settings1.ChangedSignal.member,
            path: SettingsBusNames.objectPath)
        rule.argumentPaths[0] = location.rawValue
        let (events, sink) = AsyncStream.makeStream(of: Event.self)
        resetForwarding(location)
        defer { resetForwarding(location) }
        // A signal is applied on the connection's thread as it is read, when nothing is ahead of it; otherwise
        // it goes into the event stream, to this task, which applies it in order.
        let signals: DBusSignalSubscription
        let owners: NameOwnerChanges
        do {
            signals = try await connection.forwardSignals(
                matching: rule,
                to: { [weak self] message in
                    if self?.applyNow(message, to: location) == false { sink.yield(.signal(message)) }
                },
                ended: { sink.yield(.ended) })
            owners = try await connection.nameOwnerChanges(of: link.busName)
        } catch {
            throw BrokerLink.settingsError(error, bus: link.bus)
        }
        defer { signals.end() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await change in owners where change.newOwner != nil { sink.yield(.brokerStarted) }
                sink.yield(.ended)
            }
            // A read that fails while the broker is there (a timeout under load) is tried again, sooner
            // at first; one that finds no broker waits for the broker's name to get an owner.
            var failures = 0
            func readAgain() async {
                if await resync(location) {
                    failures = 0
                    return
                }
                failures += 1
                let delay = min(2000, 50 << min(failures, 6))
                group.addTask {
                    do { try await Task.sleep(for: .milliseconds(delay)) } catch { return }
                    sink.yield(.retry)
                }
            }
            await readAgain()
            loop: for await event in events {
                switch event {
                case .signal(let message):
                    await apply(message, to: location)
                    state.withLock { state in
                        _ = state.withWatch(at: location) { watch in watch.forwarded = max(0, watch.forwarded - 1) }
                    }
                case .brokerStarted, .retry: await readAgain()
                case .ended: break loop
                }
            }
            group.cancelAll()
        }
    }

    /// Reads the location's values and reports them: as the snapshot the first time, else as a resync with
    /// what differs from the local copy.
    ///
    /// - Returns: false when the read failed and is worth trying again (the broker did not answer in time, or
    ///   failed); true when it succeeded, found no broker at all, or was refused a secret key (`AccessDenied`):
    ///   a new owner of its name will tell.
    private func resync(_ location: SettingLocation) async -> Bool {
        setReading(true, location)
        let snapshot: SettingsSnapshot
        do {
            snapshot = try await read(location)
        } catch {
            setReading(false, location)
            return error.code == .brokerUnavailable || error.code == .accessDenied
        }
        state.withLock { state in
            _ = state.withWatch(at: location) { watch in Self.adopt(snapshot, in: &watch, at: location) }
        }
        return true
    }

    /// Takes a read's values as the watch's own, and reports them to its subscribers: all of them the first
    /// time, afterwards what differs.
    private static func adopt(_ snapshot: SettingsSnapshot, in watch: inout Watch, at location: SettingLocation) {
        watch.reading = false
        guard watch.ready else {
            watch.ready = true
            watch.values = snapshot.values
            watch.delivered = snapshot.serial
            let update = Self.snapshot(of: watch, at: location)
            for subscriber in watch.subscribers.values { subscriber.yield(update) }
            return
        }
        var update = SettingsUpdate(kind: .resync, values: [:], removed: [], serial: snapshot.serial, origin: nil)
        for (key, value) in snapshot.values where watch.values[key] != value { update.values[key] = value }
        for key in watch.values.keys where snapshot.values[key] == nil { update.removed.insert(key) }
        watch.values = snapshot.values
        watch.delivered = snapshot.serial
        if !update.values.isEmpty || !update.removed.isEmpty {
            for subscriber in watch.subscribers.values { subscriber.yield(update) }
        }
    }

    private func read(_ location: SettingLocation) async throws(SettingsError) -> SettingsSnapshot {
        switch location {
        case .key(let key):
            return SettingsSnapshot(try await link.call(Settings1.GetManyRequest(keys: [key])))
        case .directory(let directory):
            return SettingsSnapshot(try await link.call(Settings1.ReadTreeRequest(directory: directory)))
        }
    }

    private func setReading(_ reading: Bool, _ location: SettingLocation) {
        state.withLock { state in
            _ = state.withWatch(at: location) { watch in watch.reading = reading }
        }
    }

    private func resetForwarding(_ location: SettingLocation) {
        state.withLock { state in
            _ = state.withWatch(at: location) { watch in
                watch.forwarded = 0
                watch.reading = false
            }
        }
    }

    /// A `Changed` signal's update of a location (the keys below it), its path and serial; nil for a malformed
    /// signal.
    private static func update(
        from message: DBusMessage, for location: SettingLocation
    ) -> (update: SettingsUpdate, path: SettingLocation, serial: UInt64)? {
        guard let signal = try? Settings1.ChangedSignal(message.body) else { return nil }
        var update = SettingsUpdate(
            kind: .change, values: [:], removed: [], serial: signal.serial, origin: signal.origin)
        switch location {
        case .key(let key):
            // The key's own name is all there is to look for: no other name needs to be read as a path.
            let name = key.rawValue
            for (text, value) in signal.values where text == name { update.values[key] = value }
            for text in signal.removed where text == name { update.removed.insert(key) }
        case .directory:
            for (text, value) in signal.values {
                guard let key = try? SettingPath(text), location.contains(key) else { continue }
                update.values[key] = value
            }
            for text in signal.removed {
                guard let key = try? SettingPath(text), location.contains(key) else { continue }
                update.removed.insert(key)
            }
        }
        return (update, signal.path, signal.serial)
    }

    /// Records an update in the local copy and passes it to the subscribers, unless it is not newer.
    private static func record(_ update: SettingsUpdate, serial: UInt64, in state: inout State, at location: SettingLocation) {
        let recorded = state.withWatch(at: location) { watch in record(update, serial: serial, in: &watch) }
        if recorded == true { pruneFloors(&state) }
    }

    /// Records an update in a watch's local copy and passes it to its subscribers, unless it is not newer;
    /// returns whether it did (the caller then prunes the floors).
    private static func record(_ update: SettingsUpdate, serial: UInt64, in watch: inout Watch) -> Bool {
        guard watch.ready, serial > watch.delivered else { return false }
        watch.delivered = serial
        for (key, value) in update.values { watch.values[key] = value }
        for key in update.removed { watch.values[key] = nil }
        if !update.values.isEmpty || !update.removed.isEmpty {
            for subscriber in watch.subscribers.values { subscriber.yield(update) }
        }
        return true
    }

    /// Applies a signal on the connection's thread, when it carries everything and nothing is ahead of it.
    ///
    /// - Returns: false when the follow task must apply it instead: the watch is not ready or is being read
    ///   again, signals handed to the task are still waiting, or the key must be read (see ``apply(_:to:)``).
    private func applyNow(_ message: DBusMessage, to location: SettingLocation) -> Bool {
        guard let (update, _, serial) = Self.update(from: message, for: location) else { return true }
        // An update that carries nothing for the location (a secret key's change, or a commit too large for one
        // signal) must be read: the follow task does that.
        let needsRead = update.values.isEmpty && update.removed.isEmpty
        return state.withLock { state in
            // One visit to the watch both decides and records.
            let outcome = state.withWatch(at: location) { watch -> (now: Bool, recorded: Bool) in
                guard watch.ready, !watch.reading, watch.forwarded == 0, !needsRead else {
                    watch.forwarded += 1
                    return (false, false)
                }
                return (true, Self.record(update, serial: serial, in: &watch))
            }
            guard let outcome else { return true }
            if outcome.recorded { Self.pruneFloors(&state) }
            return outcome.now
        }
    }

    /// Applies a `Changed(s path, a{sv} values, as removed, t serial, s origin)` signal.
    private func apply(_ message: DBusMessage, to location: SettingLocation) async {
        guard let parsed = Self.update(from: message, for: location) else { return }
        var update = parsed.update
        let path = parsed.path
        var serial = parsed.serial
        // A secret key's change carries no value. Alone in its commit it names the key as the signal's path;
        // with other keys, the signal names their common directory and the key may or may not have changed.
        // Either way, read it; from a directory's signal, report it only if it differs from the local copy.
        if case .key(let key) = location, !update.mentions(key) {
            guard let snapshot = try? await read(location), snapshot.serial >= serial else { return }
            let value = snapshot.values[key]
            let known = state.withLock { $0.watches[location]?.values[key] }
            if path == .key(key) || value != known {
                if let value { update.values[key] = value } else { update.removed.insert(key) }
            }
        }
        // A directory's signal that carries none of its keys (a commit too large for one signal, or secret keys
        // alone) says only that something under its path changed: read the directory and report what differs
        // from the local copy.
        if case .directory = location, update.values.isEmpty, update.removed.isEmpty {
            guard let snapshot = try? await read(location), snapshot.serial >= serial else { return }
            let known = state.withLock { $0.watches[location]?.values ?? [:] }
            for (key, value) in snapshot.values where known[key] != value { update.values[key] = value }
            for key in known.keys where snapshot.values[key] == nil { update.removed.insert(key) }
            // The read may be newer than the signal: signals up to its serial are in it already.
            serial = snapshot.serial
            update.serial = serial
        }
        state.withLock { state in Self.record(update, serial: serial, in: &state, at: location) }
    }
}
