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
/// What each watch knows and how signals and reads change it is a ``WatchState``; this class does the bus
/// side (subscribing, reading, reconnecting) and drives it. All state is behind one lock; updates are
/// yielded to subscribers under it, so each subscriber sees them in serial order, and the local copy is
/// updated before any subscriber hears of a change.
final class WatchHub: Sendable {
    private struct Watch {
        var subscribers: [UInt64: UpdateChannel] = [:]
        var task: Task<Void, Never>?
        var state: WatchState
        /// Kept without subscribers until the store is closed: a key read by ``WatchHub/preload(_:keys:)``.
        var pinned = false
        /// Whether the broker could not be reached before the first read (the subscribers were told so).
        var unreachable = false

        init(location: SettingLocation) {
            state = WatchState(location: location)
        }
    }

    private struct State {
        /// Every write goes through ``setWatch(_:at:)`` or ``withWatch(at:_:)``, which keep ``keyIndex`` current.
        private(set) var watches: [SettingLocation: Watch] = [:]
        /// The value and serial of each key watched by itself and ready: what ``cachedValue(of:)`` reads
        /// with one lookup, without copying a watch out of ``watches``.
        private(set) var keyIndex: [SettingPath: (value: DBusValue?, serial: UInt64)] = [:]
        var directoryWatches = 0
        var floors = WriteFloors()
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
                if case .key(let key) = location, watch.state.ready {
                    entry = (watch.state.values[key], watch.state.delivered)
                }
                return result
            }
            let result = change(&watches.values[position])
            if case .key(let key) = location { keyIndex[key] = entry }
            return result
        }

        /// Brings ``keyIndex`` up to date with the watch now at `location`.
        private mutating func index(_ watch: Watch?, at location: SettingLocation) {
            guard case .key(let key) = location else { return }
            if let watch, watch.state.ready {
                keyIndex[key] = (watch.state.values[key], watch.state.delivered)
            } else {
                keyIndex[key] = nil
            }
        }

        mutating func removeAllWatches() {
            watches = [:]
            keyIndex = [:]
        }

        /// What the ready directory watches know of a key (for a key's watch that cannot read it itself).
        func knownValues(of location: SettingLocation) -> [SettingPath: DBusValue] {
            guard case .key(let key) = location, directoryWatches > 0 else { return [:] }
            let floor = floors.floor(for: key)
            for (watched, watch) in watches where watch.state.ready && watch.state.delivered >= floor {
                if case .directory(let directory) = watched, directory.contains(key) {
                    return watch.state.values[key].map { [key: $0] } ?? [:]
                }
            }
            return [:]
        }

        /// Each watched location and the serial its copy is current at, for ``floors``.
        var delivered: LazyMapCollection<[SettingLocation: Watch], (location: SettingLocation, delivered: UInt64)> {
            watches.lazy.map { (location: $0.key, delivered: $0.value.state.delivered) }
        }

        /// Records a signal's outcome: passes its update to the watch's subscribers (done by the caller, under
        /// the lock) and forgets the floors every watch has caught up with.
        mutating func recorded(_ outcome: WatchState.Outcome) {
            if case .recorded = outcome, !floors.isEmpty { floors.prune(watches: delivered) }
        }
    }

    private enum Event: Sendable {
        case signal(WatchState.Signal)
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
            var watch = state.watches[location] ?? Watch(location: location)
            if watch.task == nil {
                if case .directory = location { state.directoryWatches += 1 }
                watch.task = Task { [weak self] in await self?.run(location) }
            }
            watch.subscribers[id] = channel
            if let snapshot = watch.state.snapshot {
                channel.yield(snapshot)
            } else if watch.unreachable {
                channel.yield(Self.unavailableUpdate(state.knownValues(of: location)))
            }
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
            guard watch.subscribers.isEmpty, !watch.pinned else {
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

    // MARK: - The local copy

    /// Makes the values of `keys`, read at once by the store (`snapshot`), the local copy of each, and keeps it
    /// current from then on: each key gets a watch that stays until the store is closed.
    ///
    /// The watch subscribes, then reads again, as every watch does (a change committed between the store's
    /// read and the subscription is found that way, and reported as a resync). A key already watched and
    /// ready keeps its copy; one whose read is in flight waits for it (that read may be older or newer).
    func preload(_ snapshot: SettingsSnapshot, keys: [SettingPath]) {
        state.withLock { state in
            guard !state.closed else { return }
            for key in keys {
                let location = SettingLocation.key(key)
                let existing: Void? = state.withWatch(at: location) { watch in
                    watch.pinned = true
                    Self.seed(&watch, key: key, from: snapshot)
                }
                if existing != nil { continue }
                var watch = Watch(location: location)
                watch.pinned = true
                Self.seed(&watch, key: key, from: snapshot)
                watch.task = Task { [weak self] in await self?.run(location) }
                state.setWatch(watch, at: location)
            }
        }
    }

    /// Fills a key's watch that has no copy and no read in flight from the store's read.
    private static func seed(_ watch: inout Watch, key: SettingPath, from snapshot: SettingsSnapshot) {
        guard !watch.state.ready, !watch.state.reading else { return }
        let read = SettingsSnapshot(values: snapshot.values[key].map { [key: $0] } ?? [:], serial: snapshot.serial)
        yield(watch.state.snapshotRead(read), to: watch.subscribers)
    }

    /// What a watch tells its subscribers when the broker cannot be reached before it has read anything.
    private static func unavailableUpdate(_ known: [SettingPath: DBusValue]) -> SettingsUpdate {
        SettingsUpdate(kind: .unavailable, values: known, removed: [], serial: 0, origin: nil)
    }

    /// The broker cannot be reached: the subscribers of a watch that has read nothing yet hear of it once, so
    /// that a stream of values gives a default rather than nothing.
    private func unreachable(_ location: SettingLocation, _ error: SettingsError) {
        guard error.code == .brokerUnavailable || error.code == .disconnected, !Task.isCancelled else { return }
        state.withLock { state in
            let known = state.knownValues(of: location)
            _ = state.withWatch(at: location) { watch in
                guard !watch.state.ready, !watch.unreachable else { return }
                watch.unreachable = true
                Self.yield(Self.unavailableUpdate(known), to: watch.subscribers)
            }
        }
    }

    func cachedValue(of key: SettingPath) -> CachedSetting? {
        state.withLock { state in
            // The common case: the key is watched by itself and this process has no write it waits for.
            if state.floors.isEmpty, let entry = state.keyIndex[key] {
                return CachedSetting(value: entry.value, serial: entry.serial)
            }
            let floor = state.floors.floor(for: key)
            if let watch = state.watches[.key(key)]?.state, watch.ready, watch.delivered >= floor {
                return CachedSetting(value: watch.values[key], serial: watch.delivered)
            }
            guard state.directoryWatches > 0 else { return nil }
            for (location, watch) in state.watches where watch.state.ready && watch.state.delivered >= floor {
                if case .directory(let directory) = location, directory.contains(key) {
                    return CachedSetting(value: watch.state.values[key], serial: watch.state.delivered)
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
            let written = transaction.sets.keys.lazy.map { SettingLocation.key($0) } + transaction.resets
            state.floors.noteWrite(of: written, serial: serial, watches: state.delivered)
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
                unreachable(location, error)
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
        change(location) { $0.connected() }
        defer { change(location) { $0.connected() } }
        // A signal is applied on the connection's thread as it is read, when nothing is ahead of it; otherwise
        // it goes into the event stream, to this task, which applies it in order.
        let signals: DBusSignalSubscription
        let owners: NameOwnerChanges
        do {
            signals = try await connection.forwardSignals(
                matching: rule,
                to: { [weak self] message in
                    guard let signal = Self.signal(from: message, for: location) else { return }
                    if self?.signalRead(signal, at: location) == true { sink.yield(.signal(signal)) }
                },
                ended: { sink.yield(.ended) })
            owners = try await connection.nameOwnerChanges(of: link.busName)
        } catch {
            throw BrokerLink.settingsError(error, bus: link.bus)
        }
        defer { signals.end() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await change in owners {
                    if change.newOwner != nil {
                        sink.yield(.brokerStarted)
                    } else {
                        self.link.status.set(.unavailable(BrokerLink.brokerLeft))
                    }
                }
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
                case .signal(let signal): await applyForwarded(signal, at: location)
                case .brokerStarted, .retry: await readAgain()
                case .ended: break loop
                }
            }
            group.cancelAll()
        }
    }

    /// Passes an update to every subscriber of a watch, at once: no subscriber's consumer is resumed before
    /// every subscriber holds the update, so a consumer that has it finds it in the watch's other streams too.
    /// The caller holds the lock.
    private static func yield(_ update: SettingsUpdate?, to subscribers: [UInt64: UpdateChannel]) {
        guard let update else { return }
        let waiting = subscribers.values.compactMap { $0.buffer(update) }
        for consumer in waiting { consumer.resume() }
    }

    /// Changes the state of the watch at `location`, if there is one.
    private func change(_ location: SettingLocation, _ body: (inout WatchState) -> Void) {
        state.withLock { state in
            _ = state.withWatch(at: location) { watch in body(&watch.state) }
        }
    }

    /// Reads the location's values and reports them: as the snapshot the first time, else as a resync with
    /// what differs from the local copy.
    ///
    /// - Returns: false when the read failed and is worth trying again (the broker did not answer in time, or
    ///   failed); true when it succeeded, found no broker at all, or was refused a secret key (`AccessDenied`):
    ///   a new owner of its name will tell.
    private func resync(_ location: SettingLocation) async -> Bool {
        change(location) { $0.beginRead() }
        let snapshot: SettingsSnapshot
        do {
            snapshot = try await read(location)
        } catch {
            change(location) { $0.readFailed() }
            unreachable(location, error)
            return error.code == .brokerUnavailable || error.code == .accessDenied
        }
        state.withLock { state in
            _ = state.withWatch(at: location) { watch in
                let update = watch.state.snapshotRead(snapshot)
                Self.yield(update, to: watch.subscribers)
            }
        }
        return true
    }

    private func read(_ location: SettingLocation) async throws(SettingsError) -> SettingsSnapshot {
        switch location {
        case .key(let key):
            return SettingsSnapshot(try await link.call(Settings1.GetManyRequest(keys: [key])))
        case .directory(let directory):
            return SettingsSnapshot(try await link.call(Settings1.ReadTreeRequest(directory: directory)))
        }
    }

    /// A `Changed` signal's update of a location (the keys below it), its path and serial; nil for a malformed
    /// signal.
    private static func signal(from message: DBusMessage, for location: SettingLocation) -> WatchState.Signal? {
        guard let signal = try? Settings1.ChangedSignal(message.body) else { return nil }
        var update = SettingsUpdate(
            kind: .change, values: [:], removed: [], serial: signal.serial, origin: signal.origin)
        switch location {
        case .key(let key):
            // The key's own name is all there is to look for: no other name needs to be read as a path.
            let name = key.rawValue
            for (text, value) in signal.values where text == name { update.values[key] = value }
            // A key left without a value of the user's is in both lists: it has a value, a default.
            for text in signal.removed where text == name && update.values[key] == nil { update.removed.insert(key) }
        case .directory:
            for (text, value) in signal.values {
                guard let key = try? SettingPath(text), location.contains(key) else { continue }
                update.values[key] = value
            }
            for text in signal.removed {
                guard let key = try? SettingPath(text), location.contains(key), update.values[key] == nil else { continue }
                update.removed.insert(key)
            }
        }
        return WatchState.Signal(update: update, path: signal.path.rawValue, serial: signal.serial)
    }

    /// Applies a signal on the connection's thread, when nothing is ahead of it.
    ///
    /// - Returns: true when the follow task must apply it instead (see ``WatchState/signalRead(_:)``).
    private func signalRead(_ signal: WatchState.Signal, at location: SettingLocation) -> Bool {
        state.withLock { state in
            // One visit to the watch both decides and records.
            let arrival = state.withWatch(at: location) { watch -> WatchState.Arrival in
                let arrival = watch.state.signalRead(signal)
                if case .applied(.recorded(let update)) = arrival { Self.yield(update, to: watch.subscribers) }
                return arrival
            }
            switch arrival {
            case nil: return false
            case .forward: return true
            case .applied(let outcome):
                state.recorded(outcome)
                return false
            }
        }
    }

    /// Applies a signal the follow task was handed, reading the location first when the signal carries none of
    /// its values (see ``WatchState/forwardedSignal(_:)``).
    private func applyForwarded(_ signal: WatchState.Signal, at location: SettingLocation) async {
        let step: WatchState.TaskStep? = state.withLock { state in
            let step = state.withWatch(at: location) { watch -> WatchState.TaskStep in
                let step = watch.state.forwardedSignal(signal)
                if case .applied(.recorded(let update)) = step { Self.yield(update, to: watch.subscribers) }
                return step
            }
            if case .applied(let outcome) = step { state.recorded(outcome) }
            return step
        }
        guard case .read = step else { return }
        let snapshot = try? await read(location)
        state.withLock { state in
            let outcome = state.withWatch(at: location) { watch -> WatchState.Outcome in
                let outcome = watch.state.forwardedRead(snapshot, for: signal)
                if case .recorded(let update) = outcome { Self.yield(update, to: watch.subscribers) }
                return outcome
            }
            if let outcome { state.recorded(outcome) }
        }
    }
}
