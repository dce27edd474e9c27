// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel
import Glibc
public import SyncProtocol

/// What a store queues for sync: which directories, which machine, and the clock.
public struct SyncSettings: Sendable {
    /// The directories whose user values sync.
    public var directories: [SettingDirectory]
    /// The id of this machine, in every version it writes.
    public var machine: String
    /// The clock of the versions.
    public var clock: HybridLogicalClock
    /// Called after a commit that queued changes, once it is durable.
    public var queued: @Sendable () -> Void

    /// Makes settings.
    public init(
        directories: [SettingDirectory], machine: String, clock: HybridLogicalClock = HybridLogicalClock(),
        queued: @escaping @Sendable () -> Void = {}
    ) {
        self.directories = directories
        self.machine = machine
        self.clock = clock
        self.queued = queued
    }

    /// Whether a key's user values sync: it is under a synced directory and its schema (if any) is neither
    /// secret nor machine-local.
    public func syncs(_ key: SettingPath, schema: SettingSchema?) -> Bool {
        guard directories.contains(where: { $0.contains(key) }) else { return false }
        if let schema, schema.isSecret || schema.isMachineLocal { return false }
        return true
    }
}

/// What a commit writes to the sync tables of the store, in the same transaction as its values: the changes
/// it queues for the database and the versions it records.
struct SyncRecord: Sendable {
    /// Changes queued for the database (local writes of synced keys).
    var queued: [SyncChange] = []
    /// Versions recorded beside the values (local writes and remote changes both).
    var versions: [(key: SettingPath, version: SyncVersion)] = []
    /// Keys that stopped syncing (registered secret or machine-local): their queued changes are dropped.
    var unqueued: [SettingPath] = []
    /// Resets queued for keys made secret, so that the database keeps no value of them: each is queued (after
    /// `unqueued` dropped the key's queued change) only when the key has a recorded version, that is when a
    /// value of it may have reached the database.
    var tombstones: [SyncChange] = []
    /// The cursor a remote commit moves to, if any.
    var cursor: Int64?

    var isEmpty: Bool { queued.isEmpty && versions.isEmpty && unqueued.isEmpty && tombstones.isEmpty && cursor == nil }
}

/// Sync across machines as the broker sees it (the engine is in `SettingsSync`, so that this module knows
/// nothing of PostgreSQL).
public protocol StoreSync: Sendable {
    /// Called once the store is open, before the broker takes its bus name: turns sync on for the store
    /// (``DurableStore/enableSync(_:)``) and starts syncing in the background. It must not wait for the
    /// database.
    func start(writes: WritePath) async
    /// Called when the broker stops, before the store is closed: ends the syncing.
    func stop() async
    /// The fields `Status` reports (`sync-state`, …).
    func status() -> [String: DBusValue]
}
