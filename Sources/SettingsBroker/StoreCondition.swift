// SPDX-License-Identifier: Apache-2.0

/// How the store file was opened: its health, what went wrong, and which files were moved aside.
///
/// The broker logs it at start-up and `Status` reports it, so a damaged or unwritable store is never
/// replaced or ignored silently.
public struct StoreCondition: Sendable, Hashable {
    /// Where the values served since start-up come from.
    public enum Source: String, Sendable {
        /// The store file itself.
        case store
        /// The store's backup (read-only, or after restoring it).
        case backup
        /// Nothing could be read: the broker started empty.
        case empty
    }

    /// The store file.
    public var storePath: String
    /// The health found at start-up.
    public var health: StoreHealth
    /// What went wrong, for people; nil when the store opened cleanly.
    public var problem: String?
    /// Where the damaged store file was moved (its `-wal` and `-shm`, if any, carry the same name plus those
    /// suffixes); nil when nothing was moved.
    public var damagedFile: String?
    /// Where a damaged backup was moved; nil when nothing was moved.
    public var damagedBackup: String?
    /// Where the values served come from.
    public var source: Source

    /// Whether writes can be committed.
    public var isWritable: Bool { health != .readOnly }
}
