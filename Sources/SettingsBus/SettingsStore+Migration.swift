// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

extension SettingsStore {
    /// Moves the user value of an old key to a new key, once, as one atomic commit: the new key gets
    /// `transform`'s result and the old key is reset.
    ///
    /// It does nothing when the old key has no user value (the value was moved already, or never set), and
    /// when the new key has a user value of its own it keeps that one and only resets the old key. It is a
    /// compare-and-set: when two processes of an app start at once and run the same migration, one moves the
    /// value and the other, finding the old key reset, does nothing.
    ///
    /// ```swift
    /// // Version 2 renamed /org/example/app/font-size to a key of type Double.
    /// try await settings.migrate(from: "/org/example/app/font-size", to: .textSize) { old in
    ///     if case .int32(let points) = old { Double(points) } else { nil }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - old: the key whose value moves.
    ///   - key: the key it moves to.
    ///   - maximumAttempts: how many conflicts to retry before giving up.
    ///   - transform: the new value made from the old one; nil to drop the old value. It may run more than once.
    /// - Returns: whether this call moved a value.
    /// - Throws: `Conflict` after `maximumAttempts` conflicts; what `transform`, ``describe(_:)`` or
    ///   ``commit(_:)`` throws.
    @discardableResult
    public func migrate<Value>(
        from old: SettingPath, to key: SettingKey<Value>, maximumAttempts: Int = 100,
        _ transform: (DBusValue) throws(SettingsError) -> Value?
    ) async throws(SettingsError) -> Bool {
        if key.fixedValue != nil { throw .debugOnly(key.path) }
        return try await commitRetryingConflicts(
            maximumAttempts: maximumAttempts, giveUp: "\(old) and \(key.path) kept changing",
            { () throws(SettingsError) -> (transaction: SettingsTransaction, result: Bool)? in
                let snapshot = try await read([old, key.path])
                guard let oldValue = snapshot.values[old], try await hasUserValue(old, at: snapshot.serial) else {
                    return nil
                }
                var transaction = SettingsTransaction(ifSerial: snapshot.serial)
                transaction.resets.append(.key(old))
                var moved = false
                if try await !hasUserValue(key.path, at: snapshot.serial), let value = try transform(oldValue) {
                    try transaction.set(key, to: value)
                    moved = true
                }
                return (transaction, moved)
            }, orElse: false)
    }

    /// Moves the user value of an old typed key to a new key, as the migration from a path does: `transform` gets its
    /// value decoded as the old key's type (its default when the stored value does not decode).
    @discardableResult
    public func migrate<Old, Value>(
        from old: SettingKey<Old>, to key: SettingKey<Value>, maximumAttempts: Int = 100,
        _ transform: (Old) throws(SettingsError) -> Value?
    ) async throws(SettingsError) -> Bool {
        try await migrate(from: old.path, to: key, maximumAttempts: maximumAttempts) { value throws(SettingsError) in
            try transform(old.decode(value).value)
        }
    }

    /// Whether a key has a user value, as described after the read at `serial` (a change since then makes the
    /// commit that follows fail with `Conflict`, and the migration read again).
    private func hasUserValue(_ key: SettingPath, at serial: UInt64) async throws(SettingsError) -> Bool {
        let description: SettingDescription
        do throws(SettingsError) {
            description = try await describe(key)
        } catch where error.code == .unknownKey {
            return false
        }
        // A secret key's value is not described: a value that differs from its default counts as the user's.
        if description.userValue == nil, let schema = description.schema, schema.isSecret {
            let snapshot = try await read([key])
            return snapshot.values[key].map { $0 != schema.defaultValue } ?? false
        }
        return description.userValue != nil
    }
}
