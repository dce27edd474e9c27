// SPDX-License-Identifier: Apache-2.0

import DBus
public import SettingsModel

/// A place where settings live: the broker on the bus (``BusSettingsStore``) or memory
/// (``InMemorySettingsStore``, for tests of app code).
///
/// The requirements are untyped (key paths and D-Bus values); the typed API — `get`, `set`, `reset`,
/// `register`, `describe`, `transaction`, `update`, `values(for:)`, `changes(for:)` — is built on them in an
/// extension, so every store behaves the same. `SettingsBusTesting` ships the conformance suite every store
/// passes.
///
/// ```swift
/// let settings: any SettingsStore = BusSettingsStore()
/// try await settings.set(.colorScheme, to: .dark)
/// for await scheme in settings.values(for: .colorScheme) { apply(scheme) }
/// ```
public protocol SettingsStore: Sendable {
    /// Reads the effective values of keys (a user value, else the registered default); keys without one are
    /// left out. The serial is the store's last commit when the values were read.
    ///
    /// - Throws: ``SettingsError``.
    func read(_ keys: [SettingPath]) async throws(SettingsError) -> SettingsSnapshot

    /// Reads every key with an effective value below a directory.
    ///
    /// - Throws: ``SettingsError``.
    func readTree(_ directory: SettingDirectory) async throws(SettingsError) -> SettingsSnapshot

    /// Lists the direct children of a directory: key names, and subdirectory names ending in `/`, sorted.
    ///
    /// - Throws: ``SettingsError``.
    func list(_ directory: SettingDirectory) async throws(SettingsError) -> [String]

    /// Commits a transaction atomically: every value is checked first, and a refused transaction stores
    /// nothing. Returns the serial of the commit (the current serial when it changed nothing).
    ///
    /// - Throws: ``SettingsError`` `TypeMismatch`, `OutOfRange`, `TooLarge`, `InvalidValue`,
    ///   `Conflict` (the transaction's ``SettingsTransaction/ifSerial`` is older than a change of a key it
    ///   touches), `NotWritable`, `StoreFailure`, and the connection's errors.
    @discardableResult
    func commit(_ transaction: SettingsTransaction) async throws(SettingsError) -> UInt64

    /// Registers schemas. Registering a key again identically does nothing; a compatible change (see
    /// `SettingSchema.changes(to:)`: a new summary, description or default, more choices, a wider range,
    /// `secret` turned on) is accepted; an incompatible one only when `replacing` is true. A stored value the
    /// new schema refuses is kept, not served.
    ///
    /// - Throws: ``SettingsError`` `SchemaConflict` naming each incompatible field, old and new, when
    ///   `replacing` is false.
    func register(_ schemas: [SettingPath: SettingSchema], replacing: Bool) async throws(SettingsError)

    /// Removes the schema of a key. Its user value is kept, and then served as it is, unless `removingValue`
    /// is true. Watchers of the key hear of a change of its effective value (the default goes away, or a kept
    /// value is served again), and ``descriptions(for:)`` of the new description.
    ///
    /// - Returns: the serial of the commit.
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has neither a schema nor a value.
    @discardableResult
    func unregister(_ key: SettingPath, removingValue: Bool) async throws(SettingsError) -> UInt64

    /// Describes a key: its schema, user value and effective value.
    ///
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has neither a value nor a schema.
    func describe(_ key: SettingPath) async throws(SettingsError) -> SettingDescription

    /// The descriptions of a key: the current one first, then a new one each time a registration, a
    /// replacement or a removal of its schema changes what ``describe(_:)`` answers (the broker's
    /// `DescriptionChanged` signal), until the consuming task is cancelled.
    ///
    /// A key with neither a value nor a schema is described with no schema, no value and no type. A store that
    /// does not implement it gets a version that yields the current description once.
    ///
    /// ```swift
    /// for await description in settings.descriptions(for: key) {
    ///     print(description.schema?.summary ?? "not registered")
    /// }
    /// ```
    func descriptions(for key: SettingPath) -> AsyncStream<SettingDescription>

    /// The updates of a key or of every key below a directory.
    ///
    /// The first element is a `SettingsUpdate.Kind/snapshot` of the current values, read after the
    /// subscription was in place; every later element is a change committed after it, in serial order, or a
    /// `SettingsUpdate.Kind/resync` with what changed while the store was unreachable. The sequence ends
    /// when the consuming task is cancelled.
    func updates(of location: SettingLocation) -> SettingsUpdates

    /// ``updates(of:)`` that keeps at most the newest `count` updates its consumer has not taken yet, dropping
    /// older ones: for a consumer that needs only the latest state. A store that does not implement it gets a
    /// version that forwards ``updates(of:)`` through a task.
    func updates(of location: SettingLocation, keepingNewest count: Int) -> SettingsUpdates

    /// The effective value of a key when it is known locally, with no round trip: the key (or a directory
    /// above it) is being watched, and the local copy is at least as new as the last change this process
    /// wrote or was told of. Nil when the store would have to ask.
    func cachedValue(of key: SettingPath) -> CachedSetting?

    /// Reads keys in one round trip into the local copy, and keeps them there, current, from then on: after
    /// it returns, ``cachedValue(of:)`` answers each key, and an ``ObservedSetting`` of one starts with its
    /// stored value. For start-up, before the first window shows (see the typed `preload`).
    ///
    /// A store whose local copy always answers (``InMemorySettingsStore``) has nothing to do; that is the
    /// version a store gets when it does not implement it.
    ///
    /// - Throws: ``SettingsError``: `BrokerUnavailable`, `TimedOut`, `Disconnected`, `AccessDenied` for a
    ///   secret key this process may not read.
    func preload(_ keys: [SettingPath]) async throws(SettingsError)

    /// Whether the store reaches its broker now. A store that does not implement it is always
    /// ``ConnectionStatus/connected``, as is ``InMemorySettingsStore``.
    var connectionStatus: ConnectionStatus { get }

    /// The connection status, then each change of it, until the consuming task is cancelled or the store is
    /// closed. While it is followed, a ``BusSettingsStore`` notices a broker that starts later by itself.
    ///
    /// ```swift
    /// for await status in settings.connectionStatuses() { statusLine.show(status) }
    /// ```
    func connectionStatuses() -> AsyncStream<ConnectionStatus>
}

extension SettingsStore {
    /// Does nothing: the local copy of this store answers every key (see the requirement).
    public func preload(_ keys: [SettingPath]) async throws(SettingsError) {}

    /// Always ``ConnectionStatus/connected`` (see the requirement).
    public var connectionStatus: ConnectionStatus { .connected }

    /// ``ConnectionStatus/connected``, once (see the requirement).
    public func connectionStatuses() -> AsyncStream<ConnectionStatus> {
        AsyncStream { continuation in
            continuation.yield(.connected)
            continuation.finish()
        }
    }
}

extension SettingsStore {
    /// Removes the schema of a key, keeping its user value (see the requirement).
    @discardableResult
    public func unregister(_ key: SettingPath) async throws(SettingsError) -> UInt64 {
        try await unregister(key, removingValue: false)
    }

    /// Removes the schema of a typed key (see the requirement).
    ///
    /// ```swift
    /// try await settings.unregister(.legacyTheme, removingValue: true)
    /// ```
    @discardableResult
    public func unregister<Value>(
        _ key: SettingKey<Value>, removingValue: Bool = false
    ) async throws(SettingsError) -> UInt64 {
        try await unregister(key.path, removingValue: removingValue)
    }

    /// Yields the current description once (see the requirement).
    public func descriptions(for key: SettingPath) -> AsyncStream<SettingDescription> {
        AsyncStream { continuation in
            let task = Task {
                continuation.yield(await currentDescription(of: key))
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    /// The description of a key, or one with no schema, no value and no type when it is unknown or cannot be
    /// read (for ``descriptions(for:)``).
    func currentDescription(of key: SettingPath) async -> SettingDescription {
        do {
            return try await describe(key)
        } catch {
            return SettingDescription(
                key: key, schema: nil, userValue: nil, type: nil, isWritable: true, serial: nil,
                problem: error.code == .unknownKey ? nil : error.message)
        }
    }
}

/// The updates of a watched location, as an `AsyncSequence` (see ``SettingsStore/updates(of:)``).
public struct SettingsUpdates: AsyncSequence, Sendable {
    public typealias Element = SettingsUpdate
    public typealias Failure = Never

    private enum Source: Sendable {
        case stream(AsyncStream<SettingsUpdate>)
        case channel(UpdateChannel.Consumer)
    }

    private let source: Source
    private let finish: @Sendable () -> Void
    /// Whether the iterator passes over `SettingsUpdate.Kind/snapshot` and `SettingsUpdate.Kind/unavailable`
    /// updates (``SettingsStore/changes(under:)``).
    private var skipsSnapshots = false

    /// Wraps a stream.
    public init(_ stream: AsyncStream<SettingsUpdate>) {
        self.init(stream, finish: {})
    }

    /// Wraps a stream whose subscription `finish` ends (the stream's continuation's `finish()`).
    package init(_ stream: AsyncStream<SettingsUpdate>, finish: @escaping @Sendable () -> Void) {
        source = .stream(stream)
        self.finish = finish
    }

    /// The consumer's side of a watch's channel; ``stop()`` finishes it.
    init(_ channel: UpdateChannel) {
        source = .channel(UpdateChannel.Consumer(channel))
        finish = { channel.finish() }
    }

    /// The same updates without the snapshot taken when watching began (nor the notice that the broker could
    /// not be reached before it): only what changed since.
    func skippingSnapshots() -> SettingsUpdates {
        var updates = self
        updates.skipsSnapshots = true
        return updates
    }

    /// Ends the subscription, when it was made with a `finish` function; an iterator then returns nil.
    public func stop() {
        finish()
    }

    /// Makes the iterator.
    public func makeAsyncIterator() -> Iterator {
        switch source {
        case .stream(let stream): Iterator(base: .stream(stream.makeAsyncIterator()), skipsSnapshots: skipsSnapshots)
        case .channel(let consumer): Iterator(base: .channel(consumer), skipsSnapshots: skipsSnapshots)
        }
    }

    /// Takes the updates one at a time; nil once the subscription has ended.
    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = SettingsUpdate
        public typealias Failure = Never

        fileprivate enum Base {
            case stream(AsyncStream<SettingsUpdate>.Iterator)
            case channel(UpdateChannel.Consumer)
        }

        fileprivate var base: Base
        fileprivate let skipsSnapshots: Bool

        /// The next update, taken in the caller's isolation.
        public mutating func next() async -> SettingsUpdate? {
            while let update = await take() {
                if skipsSnapshots && (update.kind == .snapshot || update.kind == .unavailable) { continue }
                return update
            }
            return nil
        }

        private mutating func take() async -> SettingsUpdate? {
            switch base {
            case .stream(var iterator):
                defer { base = .stream(iterator) }
                return await iterator.next(isolation: #isolation)
            case .channel(let consumer):
                return await consumer.channel.next()
            }
        }
    }
}
