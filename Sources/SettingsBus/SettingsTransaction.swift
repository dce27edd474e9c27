// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

/// Writes committed together: all of them or none, in one commit with one change signal.
///
/// ```swift
/// try await settings.transaction { transaction in
///     try transaction.set(.fontFamily, to: "Mono")
///     try transaction.set(.fontSize, to: 12)
///     transaction.reset(.lineSpacing)
/// }
/// ```
public struct SettingsTransaction: Sendable, Hashable {
    /// Values to set.
    public var sets: [SettingPath: DBusValue] = [:]
    /// Keys and directories to reset (a directory resets every key below it).
    public var resets: [SettingLocation] = []
    /// When set, the commit fails with `Conflict` if any key it touches changed after this serial
    /// (compare-and-set).
    public var ifSerial: UInt64?

    /// Makes an empty transaction.
    public init(ifSerial: UInt64? = nil) {
        self.ifSerial = ifSerial
    }

    /// Whether the transaction writes nothing.
    public var isEmpty: Bool { sets.isEmpty && resets.isEmpty }

    /// Sets a key; a value that encodes as "no value" (an optional's `nil`) resets it.
    ///
    /// - Throws: `NotWritable` for a debug-only key in a release build; `InvalidValue` when the value cannot
    ///   be encoded.
    public mutating func set<Value>(_ key: SettingKey<Value>, to value: Value) throws(SettingsError) {
        if key.fixedValue != nil { throw .debugOnly(key.path) }
        if let encoded = try Value.settingRepresentation.encode(value) {
            sets[key.path] = encoded
            resets.removeAll { $0 == .key(key.path) }
        } else {
            reset(key)
        }
    }

    /// Resets a key: it then reads its default.
    public mutating func reset<Value>(_ key: SettingKey<Value>) {
        sets[key.path] = nil
        resets.append(.key(key.path))
    }

    /// Resets every key below a directory.
    public mutating func reset(_ directory: SettingDirectory) {
        sets = sets.filter { !directory.contains($0.key) }
        resets.append(.directory(directory))
    }

    /// Sets a key to a D-Bus value, for code that is not typed (a CLI, a bridge).
    public mutating func set(_ path: SettingPath, to value: DBusValue) {
        sets[path] = value
        resets.removeAll { $0 == .key(path) }
    }

    /// Resets a key or a directory, for code that is not typed.
    public mutating func reset(_ location: SettingLocation) {
        if case .key(let path) = location { sets[path] = nil }
        if case .directory(let directory) = location { sets = sets.filter { !directory.contains($0.key) } }
        resets.append(location)
    }
}

extension SettingsError {
    /// `NotWritable` for a debug-only key in a release build.
    static func debugOnly(_ path: SettingPath) -> SettingsError {
        .notWritable("\(path) is a debug setting: it can change only in a debug build")
    }
}
