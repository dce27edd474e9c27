// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

// Validation: a changeset is checked by the shared rules (`SettingsRules`) against the staged view, the
// committed state with the changesets accepted but not yet committed laid over it. Under the `writer` lock.
extension DurableStore {
    /// Checks a changeset against the staged view and gives it the next serial.
    func resolve(_ changeset: Changeset, _ state: WriterState) throws(SettingsError) -> ResolvedChangeset {
        // validateForStorage ran in stage, before the lock.
        let view = StagedView(store: self, state: state)
        let changeset = droppingKeysWrittenSince(changeset, in: view)
        let resolution = try SettingsRules.resolve(
            sets: changeset.sets, resets: changeset.resets, registrations: changeset.registrations,
            unregistrations: changeset.unregistrations, replacing: changeset.replacing, ifSerial: changeset.ifSerial,
            in: rulesView(for: changeset, view))
        var resolved = ResolvedChangeset(
            serial: state.nextSerial, writes: resolution.writes, registrations: resolution.registrations,
            origin: changeset.origin, announced: changeset.announced, unregistrations: resolution.unregistrations,
            remote: changeset.remote)
        resolved.history = historyEntry(resolution.writes, view)
        if changeset.remote == nil, !resolution.writes.isEmpty { resolved.syncClock = localSyncClock() }
        return resolved
    }

    /// The serial of the last reset of a key without a user value since start-up, if any.
    func lastResetSerial(of key: SettingPath) -> UInt64? {
        writer.withLock { $0.resetSerials[key] }
    }
}

/// The store as validation sees it: the committed state, read under its lock (a directory in pieces), with
/// the staged writes and schemas laid over it.
struct StagedView: SettingsRulesView {
    let store: DurableStore
    let state: DurableStore.WriterState

    var baselineSerial: UInt64 { store.baselineSerial }

    var administrator: AdministratorLayer { store.committed.withLock { $0.administrator } }

    func schema(of key: SettingPath) -> SettingSchema? {
        if let staged = state.stagedSchemas[key] { return staged }
        return store.committed.withLock { $0.schemas[key] }
    }

    func userValue(of key: SettingPath) -> DBusValue? {
        if let staged = state.stagedValues[key] { return staged.value }
        return store.committed.withLock { $0.userValue(key)?.value }
    }

    func lastChange(of key: SettingPath) -> UInt64? {
        state.stagedValues[key]?.serial ?? store.committed.withLock { $0.userValue(key)?.serial } ?? state.resetSerials[key]
    }

    /// The committed keys are read in pieces, so that `Get`s are not held up by a large directory: a commit that
    /// changes them between two pieces is one whose writes are staged, and the staged view overrides them.
    func userKeys(under directory: SettingDirectory) -> [SettingPath] {
        var keys: [SettingPath] = []
        var resume: ReadResume?
        repeat {
            resume = store.committed.withLock { committed in
                committed.forEachKeyWithValue(in: directory, after: resume, limit: 8 * DurableStore.readPiece) {
                    keys.append($0)
                }
            }
        } while resume != nil
        var staged: [SettingPath: Bool] = [:]
        for (key, value) in state.stagedValues where directory.contains(key) { staged[key] = value.value != nil }
        guard !staged.isEmpty else { return keys }
        keys.removeAll { staged[$0] == false }
        let added = staged.filter { $0.value }.keys.sorted()
        guard !added.isEmpty else { return keys }
        // Both in order: merge them, leaving out keys that are in both.
        var merged: [SettingPath] = []
        merged.reserveCapacity(keys.count + added.count)
        var i = 0, j = 0
        while i < keys.count || j < added.count {
            if j == added.count || (i < keys.count && keys[i] < added[j]) {
                merged.append(keys[i]); i += 1
            } else {
                if i < keys.count, keys[i] == added[j] { i += 1 }
                merged.append(added[j]); j += 1
            }
        }
        return merged
    }

    func change(under directory: SettingDirectory, after serial: UInt64) -> SettingsRules.KeyChange? {
        for (key, staged) in state.stagedValues where directory.contains(key) && staged.serial > serial {
            return SettingsRules.KeyChange(key: key, serial: staged.serial, wasReset: staged.value == nil)
        }
        // Read in pieces, as in `userKeys(under:)`: a commit applied meanwhile has its writes staged, and they
        // were checked above.
        var changed: (key: SettingPath, serial: UInt64)?
        var resume: ReadResume?
        repeat {
            resume = store.committed.withLock { committed in
                committed.forEachValue(in: directory, after: resume, limit: 8 * DurableStore.readPiece) { key, user in
                    if user.serial > serial { changed = (key, user.serial) }
                    return changed == nil
                }
            }
        } while resume != nil
        if let (key, changedAt) = changed { return SettingsRules.KeyChange(key: key, serial: changedAt, wasReset: false) }
        if let (key, reset) = state.resetSerials.first(in: directory, after: serial) {
            return SettingsRules.KeyChange(key: key, serial: reset, wasReset: true)
        }
        return nil
    }
}
