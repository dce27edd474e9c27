// SPDX-License-Identifier: Apache-2.0

/// How the broker found its store file when it opened it, as `Status` reports it in `health`.
public enum StoreHealth: String, Sendable, CaseIterable {
    /// The store opened and passed its integrity check (`PRAGMA quick_check`).
    case ok
    /// The store was missing or damaged: a damaged file was moved aside and the store was restored from the
    /// last good backup (`<store>.backup`).
    case recoveredFromBackup = "recovered-from-backup"
    /// The store was damaged and there was no usable backup: the damaged file was moved aside and the broker
    /// started with an empty store.
    case recoveredEmpty = "recovered-empty"
    /// The store cannot be written (its directory cannot be created or written, the file is not readable, it
    /// is locked by another process, or it has a newer format): the broker serves the values it could read,
    /// from the store itself, its backup, or none, and refuses writes with `StoreFailure`.
    case readOnly = "read-only"
}
