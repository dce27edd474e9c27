// SPDX-License-Identifier: Apache-2.0

import DBus
public import SettingsModel

/// A settings store in memory, for tests of app code: it checks writes as the broker does (types, ranges,
/// choices, sizes, compare-and-set) and streams changes, but nothing leaves the process.
///
/// ```swift
/// let settings = InMemorySettingsStore()
/// let model = EditorModel(settings: settings)
/// try await settings.set(.fontSize, to: 14)
/// ```
public final class InMemorySettingsStore: SettingsStore {
    private struct State {
        /// Values, schemas and serials, under the rules the broker follows (``SettingsModel/SettingsRules``).
        var settings = SettingsState()
        var nextWatcher: UInt64 = 0
        var watchers: [UInt64: (location: SettingLocation, continuation: AsyncStream<SettingsUpdate>.Continuation)] = [:]
        var describers: [UInt64: (key: SettingPath, continuation: AsyncStream<SettingDescription>.Continuation)] = [:]

        func effective(_ key: SettingPath) -> DBusValue? { settings.effectiveValue(of: key) }

        func keys(under directory: SettingDirectory) -> Set<SettingPath> { settings.keys(under: directory) }

        /// Commits a write and tells the watchers what it changed; nil when it changes nothing.
        mutating func commit(
            sets: [(key: SettingPath, value: DBusValue)], resets: [SettingLocation] = [],
            registrations: [(key: SettingPath, schema: SettingSchema)] = [], unregistrations: [SettingPath] = [],
            replacing: Bool = false, ifSerial: UInt64? = nil, origin: String
        ) throws(SettingsError) -> UInt64? {
            guard
                let commit = try settings.commit(
                    sets: sets, resets: resets, registrations: registrations, unregistrations: unregistrations,
                    replacing: replacing, ifSerial: ifSerial)
            else { return nil }
            var update = SettingsUpdate(kind: .change, values: [:], removed: [], serial: commit.serial, origin: origin)
            // A secret key's value stays in the process: it is reported like any other.
            for changed in commit.changed {
                if let value = changed.value { update.values[changed.key] = value } else { update.removed.insert(changed.key) }
            }
            // Delivered under the lock, so watchers see commits in serial order.
            if !commit.changed.isEmpty { InMemorySettingsStore.deliver(update, to: watchers.values) }
            if !commit.described.isEmpty {
                let described = Set(commit.described)
                for (key, continuation) in describers.values where described.contains(key) {
                    continuation.yield(description(of: key))
                }
            }
            return commit.serial
        }

        /// The description of a key; one with no schema, no value and no type for an unknown key.
        func description(of key: SettingPath) -> SettingDescription {
            let schema = settings.schemas[key]
            let user = settings.values[key]
            var problem: String?
            if let schema, let user { problem = schema.whyNotServed(user) }
            return SettingDescription(
                key: key, schema: schema, userValue: schema?.isSecret == true ? nil : user,
                type: schema?.type ?? user?.type, isWritable: true, serial: settings.changes[key], problem: problem)
        }
    }

    private let state = Locked(State())
    /// The origin reported with changes written through this store.
    public let origin: String

    /// Makes an empty store.
    ///
    /// - Parameter origin: the writer name its changes report.
    public init(origin: String = "in-memory") {
        self.origin = origin
    }

    deinit {
        let (watchers, describers) = state.withLock {
            ($0.watchers.values.map(\.continuation), $0.describers.values.map(\.continuation))
        }
        for watcher in watchers { watcher.finish() }
        for describer in describers { describer.finish() }
    }

    public func read(_ keys: [SettingPath]) async throws(SettingsError) -> SettingsSnapshot {
        state.withLock { state in
            var values: [SettingPath: DBusValue] = [:]
            for key in keys { values[key] = state.effective(key) }
            return SettingsSnapshot(values: values, serial: state.settings.serial)
        }
    }

    public func readTree(_ directory: SettingDirectory) async throws(SettingsError) -> SettingsSnapshot {
        state.withLock { state in
            var values: [SettingPath: DBusValue] = [:]
            for key in state.keys(under: directory) { values[key] = state.effective(key) }
            return SettingsSnapshot(values: values, serial: state.settings.serial)
        }
    }

    public func list(_ directory: SettingDirectory) async throws(SettingsError) -> [String] {
        state.withLock { state in
            var names = Set<String>()
            let depth = directory.segments.count
            for key in state.keys(under: directory) where state.effective(key) != nil {
                let segments = key.segments
                names.insert(segments.count == depth + 1 ? segments[depth] : segments[depth] + "/")
            }
            return names.sorted()
        }
    }

    @discardableResult
    public func commit(_ transaction: SettingsTransaction) async throws(SettingsError) -> UInt64 {
        try state.withLock { state throws(SettingsError) in
            // Checked whole first: a refused transaction stores nothing.
            try state.commit(
                sets: transaction.sets.map { ($0.key, $0.value) }, resets: transaction.resets,
                ifSerial: transaction.ifSerial, origin: origin) ?? state.settings.serial
        }
    }

    /// Registers schemas as the broker does: one commit, which converts a stored value of a narrower type and
    /// reports keys whose effective value the new schemas change.
    public func register(_ schemas: [SettingPath: SettingSchema], replacing: Bool) async throws(SettingsError) {
        try state.withLock { state throws(SettingsError) in
            _ = try state.commit(
                sets: [], registrations: schemas.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                replacing: replacing, origin: origin)
        }
    }

    @discardableResult
    public func unregister(_ key: SettingPath, removingValue: Bool) async throws(SettingsError) -> UInt64 {
        try state.withLock { state throws(SettingsError) in
            try state.commit(
                sets: [], resets: removingValue ? [.key(key)] : [], unregistrations: [key], origin: origin)
                ?? state.settings.serial
        }
    }

    public func describe(_ key: SettingPath) async throws(SettingsError) -> SettingDescription {
        try state.withLock { state throws(SettingsError) in
            guard state.settings.schemas[key] != nil || state.settings.values[key] != nil else {
                throw .unknownKey("\(key) has no value and no registered schema")
            }
            return state.description(of: key)
        }
    }

    /// The descriptions of a key: the current one, then a new one after each registration, replacement or
    /// removal of its schema in this store.
    public func descriptions(for key: SettingPath) -> AsyncStream<SettingDescription> {
        let (stream, continuation) = AsyncStream.makeStream(of: SettingDescription.self)
        let id = state.withLock { state in
            defer { state.nextWatcher += 1 }
            let id = state.nextWatcher
            state.describers[id] = (key, continuation)
            continuation.yield(state.description(of: key))
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.describers.removeValue(forKey: id) }
        }
        return stream
    }

    public func updates(of location: SettingLocation) -> SettingsUpdates {
        updates(of: location, bufferingPolicy: .unbounded)
    }

    public func updates(of location: SettingLocation, keepingNewest count: Int) -> SettingsUpdates {
        updates(of: location, bufferingPolicy: .bufferingNewest(count))
    }

    private func updates(
        of location: SettingLocation, bufferingPolicy: AsyncStream<SettingsUpdate>.Continuation.BufferingPolicy
    ) -> SettingsUpdates {
        let (stream, continuation) = AsyncStream.makeStream(of: SettingsUpdate.self, bufferingPolicy: bufferingPolicy)
        let id = state.withLock { state in
            defer { state.nextWatcher += 1 }
            let id = state.nextWatcher
            state.watchers[id] = (location, continuation)
            // The snapshot is taken under the same lock as the registration, so no change falls between.
            var values: [SettingPath: DBusValue] = [:]
            switch location {
            case .key(let key): values[key] = state.effective(key)
            case .directory(let directory):
                for key in state.keys(under: directory) { values[key] = state.effective(key) }
            }
            let removed: Set<SettingPath> = if case .key(let key) = location, values[key] == nil { [key] } else { [] }
            continuation.yield(
                SettingsUpdate(kind: .snapshot, values: values, removed: removed, serial: state.settings.serial, origin: nil))
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
        }
        return SettingsUpdates(stream) { continuation.finish() }
    }

    /// Every key is local: the value is always known.
    public func cachedValue(of key: SettingPath) -> CachedSetting? {
        state.withLock { CachedSetting(value: $0.effective(key), serial: $0.settings.serial) }
    }

    /// Sends an update to the watchers whose location it touches.
    fileprivate static func deliver(
        _ update: SettingsUpdate,
        to watchers: some Sequence<(location: SettingLocation, continuation: AsyncStream<SettingsUpdate>.Continuation)>
    ) {
        for (location, continuation) in watchers {
            var filtered = update
            filtered.values = update.values.filter { location.contains($0.key) }
            filtered.removed = update.removed.filter { location.contains($0) }
            if !filtered.values.isEmpty || !filtered.removed.isEmpty { continuation.yield(filtered) }
        }
    }
}
