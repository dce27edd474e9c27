// SPDX-License-Identifier: Apache-2.0

import DBus

extension DurableStore {
    /// How the store file was opened: healthy, recovered, or read-only, and why.
    var condition: StoreCondition { persistence.condition }

    /// The store file, its backup and its connection.
    nonisolated var storePersistence: StorePersistence { persistence }

    /// What the `Status` method reports: the store file, its health, the files moved aside, the backup, and
    /// the counts.
    ///
    /// Keys: `store` (s), `health` (s: `ok`, `recovered-from-backup`, `recovered-empty` or `read-only`),
    /// `writable` (b), `durability` (s), `serial` (t), `keys` (u), `schemas` (u), `unreadable` (u, stored
    /// entries that could not be read and are kept untouched); when there is something to say: `problem` (s),
    /// `damaged-file` (s), `damaged-backup` (s), `source` (s: where the values came from after a problem:
    /// `store`, `backup` or `empty`), `backup` (s, the backup file), `backup-serial` (t), `backup-time`
    /// (x, seconds since 1970) and `restored` (s: the store file was removed or replaced while the broker ran
    /// and was written back from its open copy, and when).
    func status() -> [String: DBusValue] {
        let condition = persistence.condition
        var status: [String: DBusValue] = [
            "store": .string(condition.storePath),
            "health": .string(condition.health.rawValue),
            "writable": .boolean(condition.isWritable),
            "durability": .string(persistence.durability.rawValue),
            "serial": .uint64(serial),
            "keys": .uint32(UInt32(clamping: userValueCount)),
            "schemas": .uint32(UInt32(clamping: schemaCount)),
            "unreadable": .uint32(UInt32(clamping: unreadable.count)),
        ]
        if let problem = condition.problem {
            status["problem"] = .string(problem)
            status["source"] = .string(condition.source.rawValue)
        }
        if let note = persistence.restored.withLock({ $0 }) { status["restored"] = .string(note) }
        if let file = condition.damagedFile { status["damaged-file"] = .string(file) }
        if let file = condition.damagedBackup { status["damaged-backup"] = .string(file) }
        if let backup = persistence.backup.current() {
            status["backup"] = .string(backup.path)
            if let serial = backup.serial { status["backup-serial"] = .uint64(serial) }
            if let time = backup.time { status["backup-time"] = .int64(Int64(time)) }
        }
        return status
    }
}
