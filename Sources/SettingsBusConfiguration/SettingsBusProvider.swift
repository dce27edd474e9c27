// SPDX-License-Identifier: Apache-2.0

#if Configuration
public import Configuration
public import DBus
public import SettingsBus
import Synchronization
import SettingsModel

/// A swift-configuration provider over one directory of the settings bus.
///
/// The provider maps a configuration key to the setting key below its directory whose segments are the key's
/// components: with the directory `/org/example/`, the key `editor.font-size` (components `editor` and
/// `font-size`) reads the setting `/org/example/editor/font-size`. Components are used as they are, so a key
/// is written the way settings keys are (`font-size`, not `fontSize`, which would be the setting `fontSize`); a
/// component that is not a valid segment of a setting key (empty, or with a character other than
/// `[A-Za-z0-9._:-]`) makes the lookup throw `SettingsError.Code.invalidKey`. To use other names, wrap the
/// provider in swift-configuration's `KeyMappingProvider`. A key's context is not used.
///
/// Values are converted to the type the reader asks for: `string` from a string or an object path; `int` from
/// any integer type that fits in `Int`; `double` from a double or an integer; `bool` from a boolean; `bytes`
/// from `ay`; the array types from arrays of those, and `byteChunkArray` from `aay`. Any other value makes the
/// lookup throw `SettingsError.Code.typeMismatch`, naming the key, the value's type and the type asked for.
/// A key without a value below the directory is not found (the reader moves on to its next provider).
///
/// ``init(store:directory:name:secretsSpecifier:)`` reads the directory and starts watching it: the provider
/// keeps the directory's values current from the store's changes (`SettingsStore/updates(of:)`), so
/// ``value(forKey:type:)`` and ``snapshot()``, which the protocol requires to be synchronous, answer from that
/// copy at once, and ``watchValue(forKey:type:updatesHandler:)`` and ``watchSnapshot(updatesHandler:)`` see
/// each change made by any process, as soon as the change's signal arrives. ``fetchValue(forKey:type:)`` reads
/// the store. While the broker is unreachable, the copy keeps the last values it saw; when the broker is back,
/// it reads again and reports what changed meanwhile. Watch the directory of your app, not the root: the
/// provider keeps every value below it.
///
/// ```swift
/// func editorConfiguration(settings: some SettingsStore) async throws -> ConfigReader {
///     let provider = try await SettingsBusProvider(store: settings, directory: SettingDirectory("/org/example/"))
///     return ConfigReader(providers: [EnvironmentVariablesProvider(), provider])
/// }
///
/// let config = try await editorConfiguration(settings: BusSettingsStore())
/// let fontSize = config.int(forKey: "editor.font-size", default: 12)      // /org/example/editor/font-size
/// ```
public final class SettingsBusProvider: Sendable {
    /// The directory whose keys the provider serves.
    public let directory: SettingDirectory

    private let store: any SettingsStore
    private let state: SharedState
    private let watch: Task<Void, Never>

    /// Reads a directory of a store and starts following its changes.
    ///
    /// - Parameters:
    ///   - store: the store: a `BusSettingsStore` in an app, an `InMemorySettingsStore` in tests.
    ///   - directory: the directory whose keys the provider serves.
    ///   - name: a name shown in the provider's name (`SettingsBusProvider[name]`), as swift-configuration's
    ///     providers do.
    ///   - secretsSpecifier: which values are secret (redacted in access logs), by setting key
    ///     (`/org/example/api-token`) and value.
    /// - Throws: `SettingsError` when the directory cannot be read (the broker is unreachable, say).
    public init(
        store: some SettingsStore,
        directory: SettingDirectory,
        name: String? = nil,
        secretsSpecifier: SecretsSpecifier<String, DBusValue> = .none
    ) async throws(SettingsError) {
        let state = SharedState(
            providerName: "SettingsBusProvider\(name.map { "[\($0)]" } ?? "")", directory: directory,
            secretsSpecifier: secretsSpecifier)
        // The watch subscribes before it reads, so no change after its read is missed; the read below only
        // makes the values there before `init` returns (and its failure an error of `init`).
        let updates = store.updates(of: .directory(directory))
        let watch = Task {
            for await update in updates { state.apply(update) }
        }
        do {
            let tree = try await store.readTree(directory)
            state.seed(tree)
        } catch {
            watch.cancel()
            throw error
        }
        self.directory = directory
        self.store = store
        self.state = state
        self.watch = watch
    }

    deinit {
        watch.cancel()
    }

    /// The setting key that a configuration key maps to.
    ///
    /// ```swift
    /// let key = try provider.settingKey(for: AbsoluteConfigKey(["editor", "font-size"]))
    /// // key.rawValue == "/org/example/editor/font-size"
    /// ```
    /// - Throws: `SettingsError.Code.invalidKey` when a component is not a segment of a setting key.
    public func settingKey(for key: AbsoluteConfigKey) throws(SettingsError) -> SettingPath {
        try KeyMapping.settingKey(for: key, in: directory)
    }
}

// MARK: - ConfigProvider

extension SettingsBusProvider: ConfigProvider {
    /// `SettingsBusProvider`, or `SettingsBusProvider[name]` with a name.
    public var providerName: String { state.providerName }

    /// The value of a key, from the copy of the directory that the provider keeps current.
    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try state.snapshot().value(forKey: key, type: type)
    }

    /// The value of a key, read from the store.
    public func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        let path = try KeyMapping.settingKey(for: key, in: directory)
        let read = try await store.read([path])
        return try state.lookup(path, value: read.values[path], type: type)
    }

    /// The value of a key now and after each change of it, by any process.
    ///
    /// A key that maps to no setting key gives one failure.
    public func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey,
        type: ConfigType,
        updatesHandler: (
            _ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>
        ) async throws -> Return
    ) async throws -> Return {
        let path: SettingPath
        do {
            path = try KeyMapping.settingKey(for: key, in: directory)
        } catch {
            let (stream, continuation) = AsyncStream<Result<LookupResult, any Error>>.makeStream()
            continuation.yield(.failure(error))
            return try await updatesHandler(ConfigUpdatesAsyncSequence(stream))
        }
        let (stream, continuation) = AsyncStream<DBusValue?>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.addValueWatcher(continuation, for: path)
        defer { state.removeValueWatcher(id, for: path) }
        let state = self.state
        return try await updatesHandler(
            ConfigUpdatesAsyncSequence(
                stream.map { (value: DBusValue?) -> Result<LookupResult, any Error> in
                    do {
                        return .success(try state.lookup(path, value: value, type: type))
                    } catch {
                        return .failure(error)
                    }
                }))
    }

    /// The directory's values now.
    public func snapshot() -> any ConfigSnapshot {
        state.snapshot()
    }

    /// The directory's values now and after each change below it, by any process.
    public func watchSnapshot<Return: ~Copyable>(
        updatesHandler: (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        let (stream, continuation) = AsyncStream<Snapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.addSnapshotWatcher(continuation)
        defer { state.removeSnapshotWatcher(id) }
        return try await updatesHandler(ConfigUpdatesAsyncSequence(stream.map { $0 as any ConfigSnapshot }))
    }
}

extension SettingsBusProvider: CustomStringConvertible {
    /// The provider's name and directory.
    public var description: String { "\(providerName) at \(directory)" }
}

// MARK: - Snapshot

extension SettingsBusProvider {
    /// The values of the directory at one moment.
    struct Snapshot: ConfigSnapshot {
        var providerName: String
        var directory: SettingDirectory
        var secretsSpecifier: SecretsSpecifier<String, DBusValue>
        var values: [SettingPath: DBusValue]

        func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
            let path = try KeyMapping.settingKey(for: key, in: directory)
            return try lookup(path, value: values[path], type: type)
        }

        func lookup(_ path: SettingPath, value: DBusValue?, type: ConfigType) throws(SettingsError) -> LookupResult {
            try Self.lookup(path, value: value, type: type, secretsSpecifier: secretsSpecifier)
        }

        static func lookup(
            _ path: SettingPath, value: DBusValue?, type: ConfigType,
            secretsSpecifier: SecretsSpecifier<String, DBusValue>
        ) throws(SettingsError) -> LookupResult {
            guard let value else { return LookupResult(encodedKey: path.rawValue, value: nil) }
            let content = try ValueConversion.content(of: value, as: type, key: path)
            let isSecret = secretsSpecifier.isSecret(key: path.rawValue, value: value)
            return LookupResult(encodedKey: path.rawValue, value: ConfigValue(content, isSecret: isSecret))
        }
    }
}

// MARK: - State

extension SettingsBusProvider {
    /// The copy of the directory and the watchers of its keys, shared by the provider and its watch's task.
    final class SharedState: Sendable {
        struct Storage {
            var snapshot: Snapshot
            /// The serial of the newest state applied (0 before any).
            var serial: UInt64 = 0
            var nextID = 0
            var valueWatchers: [SettingPath: [Int: AsyncStream<DBusValue?>.Continuation]] = [:]
            var snapshotWatchers: [Int: AsyncStream<Snapshot>.Continuation] = [:]
        }

        let providerName: String
        let secretsSpecifier: SecretsSpecifier<String, DBusValue>
        private let storage: Mutex<Storage>

        init(providerName: String, directory: SettingDirectory, secretsSpecifier: SecretsSpecifier<String, DBusValue>) {
            self.providerName = providerName
            self.secretsSpecifier = secretsSpecifier
            storage = Mutex(
                Storage(
                    snapshot: Snapshot(
                        providerName: providerName, directory: directory, secretsSpecifier: secretsSpecifier,
                        values: [:])))
        }

        func snapshot() -> Snapshot {
            storage.withLock { $0.snapshot }
        }

        func lookup(_ path: SettingPath, value: DBusValue?, type: ConfigType) throws(SettingsError) -> LookupResult {
            try Snapshot.lookup(path, value: value, type: type, secretsSpecifier: secretsSpecifier)
        }

        /// The directory as read at start, unless the watch has already delivered a state as new.
        func seed(_ tree: SettingsSnapshot) {
            storage.withLock { storage in
                guard storage.serial < tree.serial || storage.serial == 0 else { return }
                storage.replace(with: tree.values, serial: tree.serial)
            }
        }

        /// One update of the watch: the state when it began (or began again), or a change.
        func apply(_ update: SettingsUpdate) {
            storage.withLock { storage in
                switch update.kind {
                case .snapshot:
                    // An older state than the one read at start would go back in time until the changes
                    // after it arrive.
                    guard update.serial >= storage.serial else { return }
                    storage.replace(with: update.values, serial: update.serial)
                case .unavailable:
                    // Nothing read yet: the values seeded at start stay until the broker answers.
                    return
                case .change, .resync:
                    var changed: [SettingPath] = []
                    for (key, value) in update.values where storage.snapshot.values[key] != value {
                        storage.snapshot.values[key] = value
                        changed.append(key)
                    }
                    for key in update.removed where storage.snapshot.values.removeValue(forKey: key) != nil {
                        changed.append(key)
                    }
                    storage.serial = max(storage.serial, update.serial)
                    storage.notify(changed)
                }
            }
        }

        func addValueWatcher(_ continuation: AsyncStream<DBusValue?>.Continuation, for key: SettingPath) -> Int {
            storage.withLock { storage in
                let id = storage.nextID
                storage.nextID += 1
                storage.valueWatchers[key, default: [:]][id] = continuation
                continuation.yield(storage.snapshot.values[key])
                return id
            }
        }

        func removeValueWatcher(_ id: Int, for key: SettingPath) {
            storage.withLock { storage in
                storage.valueWatchers[key]?[id] = nil
                if storage.valueWatchers[key]?.isEmpty == true { storage.valueWatchers[key] = nil }
            }
        }

        func addSnapshotWatcher(_ continuation: AsyncStream<Snapshot>.Continuation) -> Int {
            storage.withLock { storage in
                let id = storage.nextID
                storage.nextID += 1
                storage.snapshotWatchers[id] = continuation
                continuation.yield(storage.snapshot)
                return id
            }
        }

        func removeSnapshotWatcher(_ id: Int) {
            _ = storage.withLock { $0.snapshotWatchers.removeValue(forKey: id) }
        }
    }
}

extension SettingsBusProvider.SharedState.Storage {
    mutating func replace(with values: [SettingPath: DBusValue], serial: UInt64) {
        let old = snapshot.values
        snapshot.values = values
        self.serial = serial
        var changed = values.compactMap { key, value in old[key] == value ? nil : key }
        changed += old.keys.filter { values[$0] == nil }
        notify(changed)
    }

    /// Tells the watchers of the changed keys, and the snapshot watchers, under the lock, so that they hear of
    /// the changes in the order they were applied.
    func notify(_ changed: [SettingPath]) {
        guard !changed.isEmpty else { return }
        for key in changed {
            guard let watchers = valueWatchers[key] else { continue }
            let value = snapshot.values[key]
            for continuation in watchers.values { continuation.yield(value) }
        }
        for continuation in snapshotWatchers.values { continuation.yield(snapshot) }
    }
}
#else
#error("SettingsBusConfiguration needs the package trait `Configuration` of SettingsBus: traits: [\"Configuration\"]")
#endif
