// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// One atomic write: values to set, keys and directories to reset, schemas to register.
///
/// A changeset becomes one commit serial and, if it changes any value, one `Changed` signal.
struct Changeset: Sendable {
    /// Values to store, in order; a later entry for the same key wins.
    var sets: [(key: SettingPath, value: DBusValue)]
    /// Keys and directories whose user values are removed (directories recursively).
    var resets: [SettingLocation]
    /// Schemas to register.
    var registrations: [(key: SettingPath, schema: SettingSchema)]
    /// Makes the changeset a compare-and-set: it fails with `Conflict` if a touched key changed after this
    /// serial.
    var ifSerial: UInt64?
    /// The unique bus name of the writer, reported in the `Changed` signal.
    var origin: String
    /// Keys whose schema is removed (`Unregister`); their user values stay unless `resets` names them.
    var unregistrations: [SettingPath] = []
    /// Whether a registration may change a schema incompatibly (`Register`'s option `replace`); without it,
    /// only the compatible changes of ``SettingsModel/SettingSchema/changes(to:)`` are accepted.
    var replacing: Bool = false
    /// Keys whose effective value changed outside the changeset (the administrator's layer changed): reported
    /// in its `Changed` signal with their value as of its commit. A changeset of such keys alone is a commit
    /// all the same, for the serial its signal carries.
    var announced: [SettingPath] = []
    /// Set by the sync engine for changes pulled from other machines: the version of each key it writes. Such a
    /// commit records them and queues nothing for the database (see `DurableStore+Sync.swift`).
    var remote: RemoteChanges?

    /// Makes a changeset.
    init(
        sets: [(key: SettingPath, value: DBusValue)] = [], resets: [SettingLocation] = [],
        registrations: [(key: SettingPath, schema: SettingSchema)] = [], ifSerial: UInt64? = nil, origin: String = ""
    ) {
        self.sets = sets
        self.resets = resets
        self.registrations = registrations
        self.ifSerial = ifSerial
        self.origin = origin
    }
}

/// A changeset after validation: every directory reset expanded into the keys it removes.
struct ResolvedChangeset: Sendable {
    var serial: UInt64
    /// Final user value of each touched key, nil for a reset; in key order.
    var writes: [(key: SettingPath, value: DBusValue?)]
    var registrations: [(key: SettingPath, schema: SettingSchema)]
    var origin: String
    /// Keys reported as changed though not written (``Changeset/announced``).
    var announced: [SettingPath] = []
    /// The keys whose schema is removed.
    var unregistrations: [SettingPath] = []
    /// ``Changeset/remote``.
    var remote: RemoteChanges?
    /// What the history records of it (nil when it changes no user value, or history is off).
    var history: HistoryEntry?
    /// The clock of the version its writes of synced keys carry, read when it was validated (nil when sync is
    /// off, or for remote changes, which carry their own versions).
    var syncClock: UInt64?

    /// Whether the changeset writes nothing to the store: no value, no schema (at most it announces keys).
    var onlyAnnounces: Bool { writes.isEmpty && registrations.isEmpty && unregistrations.isEmpty }
}

/// What one commit changed, as the `Changed` and `DescriptionChanged` signals report it.
struct CommittedChange: Sendable, Hashable {
    /// The key when one key changed, else the longest common directory.
    var path: SettingLocation
    /// New effective values (a reset key with a default carries the default), in key order.
    var values: [Value]
    /// Keys left without any value.
    var removed: [String]
    /// Keys whose value is secret: reported without their value, so watchers re-read them.
    var secretKeys: [String]
    /// The commit serial.
    var serial: UInt64
    /// The unique bus name of the writer, or `schema file PATH`.
    var origin: String
    /// Keys whose schema the commit registered, replaced or removed, in key order: announced by the
    /// `DescriptionChanged` signal, after the `Changed` signal (if any).
    var describedKeys: [SettingPath] = []

    /// Whether the commit changed the effective value of a key, so that a `Changed` signal announces it.
    var changesValues: Bool { !values.isEmpty || !removed.isEmpty || !secretKeys.isEmpty }

    /// A key's new effective value.
    struct Value: Sendable, Hashable {
        var key: String
        var value: DBusValue
    }
}
