// SPDX-License-Identifier: Apache-2.0

public import DBus

// What a settings store (SettingsBus's `SettingsStore`) reads and reports, untyped: the values of keys at a
// serial, and the updates of a watched location. Apps see them through typed keys; a store implements with them.

/// The effective value of a key as known locally.
public struct CachedSetting: Sendable, Hashable {
    /// The effective value; nil when the key has none.
    public var value: DBusValue?
    /// The serial the local copy is current at.
    public var serial: UInt64

    /// Makes a cached value.
    public init(value: DBusValue?, serial: UInt64) {
        self.value = value
        self.serial = serial
    }
}

/// Effective values read at one serial.
public struct SettingsSnapshot: Sendable, Hashable {
    /// The effective values; keys without one are absent.
    public var values: [SettingPath: DBusValue]
    /// The store's last commit when the values were read.
    public var serial: UInt64

    /// Makes a snapshot.
    public init(values: [SettingPath: DBusValue], serial: UInt64) {
        self.values = values
        self.serial = serial
    }
}

/// What one commit changed below a watched location, or the state when watching began.
public struct SettingsUpdate: Sendable, Hashable {
    /// What an update reports.
    public enum Kind: Sendable, Hashable {
        /// The current values when watching began (`values` holds every key with a value).
        case snapshot
        /// One commit.
        case change
        /// What changed while the store was unreachable (a broker restart), found by reading again.
        case resync
        /// The broker cannot be reached before the watch could read anything: `values` holds what the local
        /// copy knows of the location from other watches (often nothing), `serial` is 0. A
        /// `snapshot` follows when the broker is reached. `SettingsStore.values(for:)` yields the
        /// key's default then, rather than nothing.
        case unavailable
    }

    /// What the update reports.
    public var kind: Kind
    /// New effective values (a key reset to a registered default carries the default).
    public var values: [SettingPath: DBusValue]
    /// Keys left without any value.
    public var removed: Set<SettingPath>
    /// The serial of the commit, or of the read.
    public var serial: UInt64
    /// The unique bus name of the writer, when known.
    public var origin: String?

    /// Makes an update.
    public init(
        kind: Kind, values: [SettingPath: DBusValue], removed: Set<SettingPath>, serial: UInt64, origin: String?
    ) {
        self.kind = kind
        self.values = values
        self.removed = removed
        self.serial = serial
        self.origin = origin
    }

    /// Whether the update says anything about `key`.
    public func mentions(_ key: SettingPath) -> Bool {
        values[key] != nil || removed.contains(key)
    }
}
