// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

// The administrator's layer: defaults and locks that apply to every reader and writer (``AdministratorLayer``,
// read by ``AdministratorFiles``). It is kept in memory only (the files are read again at every start), and a
// new one is put in force under the `writer` lock, so that no write is checked against the old one after it;
// the keys whose effective value it changed are then announced by a commit of their own (`announced`), which
// gives them a serial and one `Changed` signal with origin `administrator`.
extension DurableStore {
    /// Puts a new administrator's layer in force, and returns the changeset that announces the keys whose
    /// effective value it changed (for ``WritePath`` to commit) with the keys whose description changed:
    /// locked or unlocked, or their administrator's default changed (for `DescriptionChanged`); of the keys
    /// under a directory locked or unlocked, those with a value or a schema.
    func putAdministrator(_ layer: AdministratorLayer) -> (announcing: Changeset, described: [SettingPath]) {
        let (announced, described) = writer.withLock { _ in
            committed.withLock { state -> ([SettingPath], [SettingPath]) in
                let old = state.administrator
                var candidates = Set(old.defaults.keys).union(layer.defaults.keys)
                var described = Set<SettingPath>()
                for key in candidates where old.defaults[key] != layer.defaults[key] { described.insert(key) }
                for location in Set(old.locks.keys).union(layer.locks.keys)
                where old.locks[location] != layer.locks[location] {
                    switch location {
                    case .key(let key):
                        candidates.insert(key)
                        described.insert(key)
                    case .directory(let directory):
                        _ = state.forEachKey(in: directory, after: nil, limit: .max) { text, _, _ in
                            let key = SettingPath(unchecked: text)
                            candidates.insert(key)
                            described.insert(key)
                        }
                        for key in candidates where directory.contains(key) { described.insert(key) }
                    }
                }
                var before: [SettingPath: DBusValue?] = [:]
                for key in candidates { before[key] = .some(state.effectiveValue(key)) }
                state.administrator = layer
                let changed = candidates.filter { key in before[key]! != state.effectiveValue(key) }
                return (changed.sorted(), described.sorted())
            }
        }
        var changeset = Changeset(origin: Self.administratorOrigin)
        changeset.announced = announced
        return (changeset, described)
    }

    /// The origin of the commits that announce the administrator's changes.
    static let administratorOrigin = "administrator"
}
