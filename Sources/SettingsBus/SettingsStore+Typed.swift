// SPDX-License-Identifier: Apache-2.0

import DBus
public import SettingsModel

extension SettingsStore {
    /// Reads a key.
    ///
    /// A watched key is read from the local copy, with no round trip. A key with no value reads its default;
    /// so does a stored value that is not of the key's type (``describe(_:)`` says why).
    ///
    /// - Throws: ``SettingsError``: `BrokerUnavailable`, `TimedOut`, `Disconnected`.
    public func get<Value>(_ key: SettingKey<Value>) async throws(SettingsError) -> Value {
        if let fixed = key.fixedValue { return fixed }
        if let cached = cachedValue(of: key.path) { return key.decode(cached.value).value }
        let snapshot = try await read([key.path])
        return key.decode(snapshot.values[key.path]).value
    }

    /// Reads a key from the local copy only: the value when the key is watched and the copy is current,
    /// else nil (no round trip is made).
    @inlinable  // specialized in the caller: no generic metadata lookups on a path meant to cost nanoseconds
    public func cached<Value>(_ key: SettingKey<Value>) -> Value? {
        if let fixed = key.fixedValue { return fixed }
        guard let cached = cachedValue(of: key.path) else { return nil }
        return key.decode(cached.value).value
    }

    /// Reads keys with one round trip into the local copy, which then keeps them current: afterwards
    /// ``cached(_:)`` answers each, and an ``ObservedSetting`` of one starts with the stored value instead of
    /// the default. Call it at start-up, before the first window shows.
    ///
    /// ```swift
    /// try await settings.preload(.colorScheme, .fontSize)
    /// let scheme = ObservedSetting(.colorScheme, in: settings)   // the stored scheme, at once
    /// ```
    ///
    /// A ``BusSettingsStore`` watches the keys from then on, until it is closed (see the untyped `preload`,
    /// which takes paths).
    ///
    /// - Throws: ``SettingsError``: `BrokerUnavailable`, `TimedOut`, `Disconnected`.
    public func preload<each Value: SettingValue>(_ keys: repeat SettingKey<each Value>) async throws(SettingsError) {
        var paths: [SettingPath] = []
        for key in repeat each keys {
            if key.fixedValue == nil { paths.append(key.path) }
        }
        try await preload(paths)
    }

    /// Sets a key; an optional key set to `nil` is reset.
    ///
    /// - Returns: the serial of the commit, which every process's change streams report.
    /// - Throws: ``SettingsError``: `TypeMismatch`, `OutOfRange` or `TooLarge` when the broker
    ///   refuses the value; `NotWritable` for a debug-only key in a release build.
    @discardableResult
    public func set<Value>(_ key: SettingKey<Value>, to value: Value) async throws(SettingsError) -> UInt64 {
        var transaction = SettingsTransaction()
        try transaction.set(key, to: value)
        return try await commit(transaction)
    }

    /// Resets a key: it then reads its default.
    @discardableResult
    public func reset<Value>(_ key: SettingKey<Value>) async throws(SettingsError) -> UInt64 {
        if key.fixedValue != nil { throw .debugOnly(key.path) }
        var transaction = SettingsTransaction()
        transaction.reset(key)
        return try await commit(transaction)
    }

    /// Resets every key below a directory.
    @discardableResult
    public func reset(_ directory: SettingDirectory) async throws(SettingsError) -> UInt64 {
        var transaction = SettingsTransaction()
        transaction.reset(directory)
        return try await commit(transaction)
    }

    /// Registers keys with the broker: their types, defaults, summaries, ranges and choices. The broker then
    /// refuses values of any other type, from any client.
    ///
    /// ```swift
    /// try await settings.register(.colorScheme, .fontSize, .recentFiles)
    /// ```
    /// - Throws: ``SettingsError`` `SchemaConflict` when a key is registered differently;
    ///   `InvalidValue` for a key whose default is nil.
    public func register<each Value: SettingValue>(
        _ keys: repeat SettingKey<each Value>, replacing: Bool = false
    ) async throws(SettingsError) {
        var schemas: [SettingPath: SettingSchema] = [:]
        for key in repeat each keys {
            schemas[key.path] = try key.schema()
        }
        try await register(schemas, replacing: replacing)
    }

    /// Registers schemas, accepting compatible changes only (``register(_:replacing:)`` with `replacing: false`).
    ///
    /// - Throws: ``SettingsError`` `SchemaConflict` naming each incompatible field, old and new.
    public func register(_ schemas: [SettingPath: SettingSchema]) async throws(SettingsError) {
        try await register(schemas, replacing: false)
    }

    /// Describes a key, and says whether its stored value can be read as the key's type.
    ///
    /// - Throws: ``SettingsError`` `UnknownKey` when the key has neither a value nor a schema.
    public func describe<Value>(_ key: SettingKey<Value>) async throws(SettingsError) -> SettingDescription {
        var description = try await describe(key.path)
        if description.problem == nil, let user = description.userValue, let mismatch = key.decode(user).mismatch {
            description.problem = "the stored value cannot be read as \(Value.self), so the key reads its default: "
                + mismatch.message
        }
        return description
    }

    /// Commits several writes atomically: all of them or none, with one change signal.
    ///
    /// - Returns: the serial of the commit.
    /// - Throws: what ``commit(_:)`` throws, or what `body` throws (then nothing is written).
    @discardableResult
    public func transaction(
        _ body: (inout SettingsTransaction) throws(SettingsError) -> Void
    ) async throws(SettingsError) -> UInt64 {
        var transaction = SettingsTransaction()
        try body(&transaction)
        return try await commit(transaction)
    }

    /// Commits several writes atomically, with a body that may throw errors of its own: the natural spelling
    /// `transaction { transaction in try transaction.set(…) }` and app code that throws its own errors.
    ///
    /// - Returns: the serial of the commit.
    /// - Throws: what `body` throws (then nothing is written), or the `SettingsError` of ``commit(_:)``.
    @_disfavoredOverload
    @discardableResult
    public func transaction<Failure: Error>(
        _ body: (inout SettingsTransaction) throws(Failure) -> Void
    ) async throws -> UInt64 {
        var transaction = SettingsTransaction()
        try body(&transaction)
        return try await commit(transaction)
    }

    /// ``update(_:maximumAttempts:_:)`` with a transform that may throw errors of its own, such as app code's.
    ///
    /// - Throws: what `transform` throws (then nothing is written), or the `SettingsError` of the update.
    @_disfavoredOverload
    @discardableResult
    public func update<Value, Failure: Error>(
        _ key: SettingKey<Value>, maximumAttempts: Int = 1000, _ transform: (inout Value) throws(Failure) -> Void
    ) async throws -> Value {
        var thrown: Failure?
        do {
            return try await update(key, maximumAttempts: maximumAttempts) { (value: inout Value) throws(SettingsError) in
                do throws(Failure) {
                    try transform(&value)
                } catch {
                    thrown = error
                    throw .invalidValue("the update of \(key.path) was abandoned by its transform")
                }
            }
        } catch {
            if let thrown { throw thrown }
            throw error
        }
    }

    /// Reads a key, changes the value and writes it back, as one compare-and-set; when another writer
    /// changed the key in between (`Conflict`), it reads again and retries.
    ///
    /// ```swift
    /// let launches = try await settings.update(.launchCount) { $0 += 1 }
    /// ```
    /// - Parameters:
    ///   - key: the key.
    ///   - maximumAttempts: how many conflicts to retry before giving up.
    ///   - transform: changes the value; it may run more than once.
    /// - Returns: the value written.
    /// - Throws: `Conflict` after `maximumAttempts` conflicts; what `transform` or ``commit(_:)`` throws.
    @discardableResult
    public func update<Value>(
        _ key: SettingKey<Value>, maximumAttempts: Int = 1000,
        _ transform: (inout Value) throws(SettingsError) -> Void
    ) async throws(SettingsError) -> Value {
        if key.fixedValue != nil { throw .debugOnly(key.path) }
        return try await commitRetryingConflicts(maximumAttempts: maximumAttempts, giveUp: "\(key.path) kept changing") {
            () throws(SettingsError) in
            let snapshot = try await read([key.path])
            var value = key.decode(snapshot.values[key.path]).value
            try transform(&value)
            var transaction = SettingsTransaction(ifSerial: snapshot.serial)
            try transaction.set(key, to: value)
            return (transaction, value)
        }
    }

    /// Prepares a compare-and-set with `prepare` and commits it; when the commit ends in `Conflict`, waits a
    /// little (at random, so that writers that collided do not collide again in lockstep) and prepares it
    /// again, at most `maximumAttempts` times. `prepare` returns nil to end at once with `nothing`.
    ///
    /// - Throws: `Conflict` after `maximumAttempts` conflicts, saying `giveUp`; what `prepare` or
    ///   ``commit(_:)`` throws otherwise.
    func commitRetryingConflicts<Result>(
        maximumAttempts: Int, giveUp: String,
        _ prepare: () async throws(SettingsError) -> (transaction: SettingsTransaction, result: Result)?,
        orElse nothing: Result? = nil
    ) async throws(SettingsError) -> Result {
        var lastConflict: SettingsError?
        for attempt in 0..<max(1, maximumAttempts) {
            guard let (transaction, result) = try await prepare() else { return nothing! }
            do throws(SettingsError) {
                try await commit(transaction)
                return result
            } catch where error.code == .conflict {
                lastConflict = error
                let spread = UInt64.random(in: 0...UInt64(min(attempt, 20) * 100 + 50))
                do { try await Task.sleep(for: .microseconds(spread)) } catch { throw .conflict("cancelled") }
            }
        }
        throw lastConflict ?? .conflict(giveUp)
    }
}
