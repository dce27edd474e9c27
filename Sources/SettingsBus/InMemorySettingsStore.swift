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
        var values: [SettingPath: DBusValue] = [:]
        var schemas: [SettingPath: SettingSchema] = [:]
        /// The serial of each key's last change, kept after a reset so compare-and-set sees removals.
        var changed: [SettingPath: UInt64] = [:]
        var serial: UInt64 = 0
        var nextWatcher: UInt64 = 0
        var watchers: [UInt64: (location: SettingLocation, continuation: AsyncStream<SettingsUpdate>.Continuation)] = [:]

        func effective(_ key: SettingPath) -> DBusValue? {
            if let value = values[key] {
                guard let schema = schemas[key] else { return value }
                if schema.accepts(value) { return value }
            }
            return schemas[key]?.defaultValue
        }

        func keys(under directory: SettingDirectory) -> Set<SettingPath> {
            Set(values.keys.filter(directory.contains)).union(schemas.keys.filter(directory.contains))
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
        let watchers = state.withLock { $0.watchers.values.map(\.continuation) }
        for watcher in watchers { watcher.finish() }
    }

    public func read(_ keys: [SettingPath]) async throws(SettingsError) -> SettingsSnapshot {
        state.withLock { state in
            var values: [SettingPath: DBusValue] = [:]
            for key in keys { values[key] = state.effective(key) }
            return SettingsSnapshot(values: values, serial: state.serial)
        }
    }

    public func readTree(_ directory: SettingDirectory) async throws(SettingsError) -> SettingsSnapshot {
        state.withLock { state in
            var values: [SettingPath: DBusValue] = [:]
            for key in state.keys(under: directory) { values[key] = state.effective(key) }
            return SettingsSnapshot(values: values, serial: state.serial)
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
        let update = try state.withLock { state throws(SettingsError) -> SettingsUpdate? in
            // Check everything first: a refused transaction stores nothing. A value of a narrower type that
            // converts without loss is stored as the registered type, as the broker does.
            var sets = transaction.sets
            for (key, value) in transaction.sets {
                try value.validateForStorage(at: key)
                guard let schema = state.schemas[key] else { continue }
                if value.type != schema.type, let converted = value.losslesslyConverted(to: schema.type) {
                    sets[key] = converted
                }
                try schema.validate(sets[key]!, for: key)
            }
            var resetKeys = Set<SettingPath>()
            for location in transaction.resets {
                switch location {
                case .key(let key): resetKeys.insert(key)
                case .directory(let directory): resetKeys.formUnion(state.values.keys.filter(directory.contains))
                }
            }
            if let ifSerial = transaction.ifSerial {
                var touched = Set(transaction.sets.keys).union(resetKeys)
                for case .directory(let directory) in transaction.resets {
                    touched.formUnion(state.changed.keys.filter(directory.contains))
                }
                if let key = touched.sorted().first(where: { (state.changed[$0] ?? 0) > ifSerial }) {
                    throw .conflict("\(key) changed at serial \(state.changed[key]!), after serial \(ifSerial)")
                }
            }
            let writes = resetKeys.filter { state.values[$0] != nil && transaction.sets[$0] == nil }
            guard !transaction.sets.isEmpty || !writes.isEmpty else { return nil }
            state.serial += 1
            let serial = state.serial
            var update = SettingsUpdate(kind: .change, values: [:], removed: [], serial: serial, origin: origin)
            for key in writes {
                state.values[key] = nil
                state.changed[key] = serial
            }
            for (key, value) in sets {
                state.values[key] = value
                state.changed[key] = serial
            }
            for key in writes.union(transaction.sets.keys) {
                if let value = state.effective(key) { update.values[key] = value } else { update.removed.insert(key) }
            }
            // Delivered under the lock, so watchers see commits in serial order.
            Self.deliver(update, to: state.watchers.values)
            return update
        }
        guard let update else { return state.withLock { $0.serial } }
        return update.serial
    }

    public func register(_ schemas: [SettingPath: SettingSchema], replacing: Bool) async throws(SettingsError) {
        try state.withLock { state throws(SettingsError) in
            for (key, schema) in schemas {
                try schema.validate(for: key)
                if let existing = state.schemas[key] {
                    _ = try existing.checkEvolution(to: schema, for: key, replacing: replacing)
                }
            }
            for (key, schema) in schemas {
                state.schemas[key] = schema
                // A stored value that converts to the schema's type without loss is converted.
                if let stored = state.values[key], stored.type != schema.type,
                    let converted = stored.losslesslyConverted(to: schema.type), schema.accepts(converted)
                {
                    state.values[key] = converted
                }
            }
        }
    }

    public func describe(_ key: SettingPath) async throws(SettingsError) -> SettingDescription {
        try state.withLock { state throws(SettingsError) in
            let schema = state.schemas[key]
            let user = state.values[key]
            guard schema != nil || user != nil else {
                throw .unknownKey("\(key) has no value and no registered schema")
            }
            var problem: String?
            if let schema, let user { problem = schema.whyNotServed(user) }
            return SettingDescription(
                key: key, schema: schema, userValue: schema?.isSecret == true ? nil : user,
                type: schema?.type ?? user?.type, isWritable: true, serial: state.changed[key], problem: problem)
        }
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
                SettingsUpdate(kind: .snapshot, values: values, removed: removed, serial: state.serial, origin: nil))
            return id
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.watchers.removeValue(forKey: id) }
        }
        return SettingsUpdates(stream) { continuation.finish() }
    }

    /// Every key is local: the value is always known.
    public func cachedValue(of key: SettingPath) -> CachedSetting? {
        state.withLock { CachedSetting(value: $0.effective(key), serial: $0.serial) }
    }

    /// Sends an update to the watchers whose location it touches.
    private static func deliver(
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
