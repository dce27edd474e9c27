// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

/// A change of one key, as ``SettingsStore/changes(for:)`` reports it.
public struct SettingChange<Value: SettingValue>: Sendable {
    /// What happened to the key.
    public enum Kind: Sendable, Hashable {
        /// The key has a new effective value (a reset key with a registered default carries the default).
        case set
        /// The key was reset and has no value: ``SettingChange/value`` is the key's default.
        case reset
    }

    /// What happened.
    public var kind: Kind
    /// The key's new value.
    public var value: Value
    /// The unique bus name of the process that wrote it; nil when the change was found by reading again
    /// (after a broker restart).
    public var origin: String?
    /// The serial of the commit.
    public var serial: UInt64
    /// Why the stored value could not be read as `Value` (the change then carries the key's default).
    public var problem: SettingsError?

    @usableFromInline
    init(kind: Kind, value: Value, origin: String?, serial: UInt64, problem: SettingsError?) {
        self.kind = kind
        self.value = value
        self.origin = origin
        self.serial = serial
        self.problem = problem
    }
}

extension SettingsStore {
    /// The values of a key: its current value first, then each new value.
    ///
    /// The stream subscribes before it reads, so no change is missed, drops changes older than its read,
    /// and keeps only the newest value when the consumer is slower than the writers. It survives a broker
    /// restart: when the broker is back, it reads again and yields the value if it changed.
    ///
    /// It never waits silently for a broker that cannot be reached: when the first read finds none (no
    /// broker owns its name and D-Bus activation cannot start one, or there is no bus), it yields the value
    /// the local copy knows, else the key's default, at once, and the stored value when a broker answers
    /// later. ``SettingsStore/connectionStatus`` says which it is.
    ///
    /// ```swift
    /// for await scheme in settings.values(for: .colorScheme) {
    ///     window.apply(scheme)
    /// }
    /// ```
    /// - Important: The stream ends when the task iterating it is cancelled.
    public func values<Value>(for key: SettingKey<Value>) -> SettingKey<Value>.Values {
        if let fixed = key.fixedValue { return SettingKey<Value>.Values(fixed: fixed) }
        // The consumer decodes each value as it takes it: no task stands between the store and the consumer,
        // and a slow consumer finds only the newest update waiting.
        return SettingKey<Value>.Values(updates: updates(of: .key(key.path), keepingNewest: 1), key: key)
    }

    /// Forwards ``updates(of:)`` through a task into a stream that keeps the newest `count` updates.
    public func updates(of location: SettingLocation, keepingNewest count: Int) -> SettingsUpdates {
        let (stream, continuation) = AsyncStream.makeStream(
            of: SettingsUpdate.self, bufferingPolicy: .bufferingNewest(count))
        let updates = updates(of: location)
        let task = Task {
            for await update in updates { continuation.yield(update) }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return SettingsUpdates(stream) { continuation.finish() }
    }

    /// The changes of a key, each with the writer's origin: a new value or a reset. The current value is not
    /// reported; use ``values(for:)`` for that.
    ///
    /// The stream keeps up to 128 pending changes; a consumer that falls further behind loses the oldest.
    /// Like ``values(for:)``, it decodes each change in the consumer's task as it is taken: no task stands
    /// between the store and the consumer.
    ///
    /// - Important: The stream ends when the task iterating it is cancelled.
    public func changes<Value>(for key: SettingKey<Value>) -> SettingKey<Value>.Changes {
        SettingKey<Value>.Changes(updates: updates(of: .key(key.path), keepingNewest: Self.pendingChanges), key: key)
    }

    /// The changes below a directory: one `SettingsUpdate` per commit that touched a key below it, with the
    /// new values and the keys left without a value. The state when watching began is not reported.
    ///
    /// The stream keeps up to 128 pending changes; a consumer that falls further behind loses the oldest.
    ///
    /// - Important: The stream ends when the task iterating it is cancelled.
    public func changes(under directory: SettingDirectory) -> SettingsUpdates {
        updates(of: .directory(directory), keepingNewest: Self.pendingChanges).skippingSnapshots()
    }

    /// How many changes ``changes(for:)`` and ``changes(under:)`` keep for a consumer that is behind (the
    /// snapshot taken when watching began counts as one until it is passed over).
    private static var pendingChanges: Int { 128 }

    /// Runs `body` with the values of a key and stops watching when it returns.
    ///
    /// ```swift
    /// try await settings.watch(.colorScheme) { schemes in
    ///     for await scheme in schemes { if scheme == .dark { break } }
    /// }
    /// ```
    public func watch<Value, Result: Sendable>(
        _ key: SettingKey<Value>, _ body: (SettingKey<Value>.Values) async throws -> Result
    ) async rethrows -> Result {
        let values = values(for: key)
        defer { values.stop() }
        return try await body(values)
    }
}

extension SettingKey {
    /// The values of one key (``SettingsStore/values(for:)``).
    public struct Values: AsyncSequence, Sendable {
        public typealias Element = Value
        public typealias Failure = Never

        private let updates: SettingsUpdates?
        /// The key's path and default (a stream keeps no more of its key, which is not fixed); nil with `fixed`.
        private let key: (path: SettingPath, defaultValue: Value)?
        private let fixed: Value?

        /// The values of a key that is not fixed, decoded from its updates.
        init(updates: SettingsUpdates, key: SettingKey<Value>) {
            self.updates = updates
            self.key = (key.path, key.defaultValue)
            self.fixed = nil
        }

        /// One value and the end (a debug key's fixed value).
        init(fixed: Value) {
            self.updates = nil
            self.key = nil
            self.fixed = fixed
        }

        /// Yields the value of each update that reports the key, decoded when it is taken.
        ///
        /// Inlinable, so that it is specialized for `Value` in the consumer's module: generic code would look up
        /// the metadata of its types at run time for every value.
        public struct Iterator: AsyncIteratorProtocol {
            @usableFromInline var updates: SettingsUpdates.Iterator?
            @usableFromInline let path: SettingPath?
            @usableFromInline let defaultValue: Value?
            @usableFromInline var fixed: Value?
            /// The effective value behind the value yielded last, with the default as it encodes (`.some(nil)`: a
            /// default that encodes to no value); nil before the first.
            @usableFromInline var last: DBusValue??
            /// The default as it encodes, once it was needed.
            @usableFromInline var encodedDefault: DBusValue??

            @usableFromInline
            init(updates: SettingsUpdates.Iterator?, path: SettingPath?, defaultValue: Value?, fixed: Value?) {
                self.updates = updates
                self.path = path
                self.defaultValue = defaultValue
                self.fixed = fixed
                self.last = nil
                self.encodedDefault = nil
            }

            @inlinable
            public mutating func next() async -> Value? {
                if let value = fixed {
                    fixed = nil
                    return value
                }
                guard let path, let defaultValue else { return nil }
                while let update = await updates?.next() {
                    // One lookup for the common case, a new value of the key.
                    let stored = update.values[path]
                    // Before the first value: a store that cannot reach its broker gives the default (or what it
                    // knows) rather than nothing.
                    guard stored != nil || update.kind == .snapshot || update.removed.contains(path)
                        || (update.kind == .unavailable && last == nil)
                    else { continue }
                    // A write of the value the key has (or a read again that finds it) is not a new value.
                    let effective: DBusValue?
                    if let stored {
                        effective = stored
                    } else {
                        if encodedDefault == nil { encodedDefault = .some(try? Value.settingRepresentation.encode(defaultValue)) }
                        effective = encodedDefault ?? nil
                    }
                    if let last, last == effective { continue }
                    last = .some(effective)
                    return SettingKey.decode(stored, default: defaultValue).value
                }
                return nil
            }
        }

        /// Makes the iterator.
        public func makeAsyncIterator() -> Iterator {
            Iterator(updates: updates?.makeAsyncIterator(), path: key?.path, defaultValue: key?.defaultValue, fixed: fixed)
        }

        /// Ends the stream and its subscription; an iterator then returns nil.
        public func stop() {
            updates?.stop()
        }
    }
}

extension SettingKey {
    /// The changes of one key (``SettingsStore/changes(for:)``).
    public struct Changes: AsyncSequence, Sendable {
        public typealias Element = SettingChange<Value>
        public typealias Failure = Never

        private let updates: SettingsUpdates
        private let key: SettingKey<Value>

        /// The changes of a key, decoded from its updates.
        init(updates: SettingsUpdates, key: SettingKey<Value>) {
            self.updates = updates
            self.key = key
        }

        /// Yields each update that reports the key (the snapshot taken when watching began is passed over),
        /// decoded when it is taken.
        ///
        /// Inlinable, so that it is specialized for `Value` in the consumer's module (see ``SettingKey/Values/Iterator``).
        public struct Iterator: AsyncIteratorProtocol {
            @usableFromInline var updates: SettingsUpdates.Iterator
            @usableFromInline let key: SettingKey<Value>

            @usableFromInline
            init(updates: SettingsUpdates.Iterator, key: SettingKey<Value>) {
                self.updates = updates
                self.key = key
            }

            @inlinable
            public mutating func next() async -> SettingChange<Value>? {
                while let update = await updates.next() {
                    guard update.kind != .snapshot, update.kind != .unavailable else { continue }
                    let stored = update.values[key.path]
                    guard stored != nil || update.removed.contains(key.path) else { continue }
                    let (value, problem) = key.decode(stored)
                    return SettingChange(
                        kind: stored == nil ? .reset : .set, value: value, origin: update.origin, serial: update.serial,
                        problem: problem)
                }
                return nil
            }
        }

        /// Makes the iterator.
        public func makeAsyncIterator() -> Iterator {
            Iterator(updates: updates.makeAsyncIterator(), key: key)
        }

        /// Ends the stream and its subscription; an iterator then returns nil.
        public func stop() {
            updates.stop()
        }
    }
}
