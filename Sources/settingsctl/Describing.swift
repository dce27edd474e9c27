// SPDX-License-Identifier: Apache-2.0

import SettingsBus
import SettingsModel

/// `Describe` of many keys at once, for the verbs that need each key's schema or source (`dump`, `load`).
enum Describing {
    /// The most `Describe` calls in flight at once.
    static let describesInFlight = 32

    /// What the broker says of each key: its schema, whether it is writable; a key it knows nothing of is
    /// left out.
    static func descriptions(
        of keys: [SettingPath], in store: BusSettingsStore
    ) async throws -> [SettingPath: SettingDescription] {
        try await withThrowingTaskGroup(of: (SettingPath, SettingDescription?).self) { group in
            var descriptions: [SettingPath: SettingDescription] = [:]
            var pending = keys[...]
            while let key = pending.popFirst() {
                group.addTask { (key, try await description(of: key, in: store)) }
                if keys.count - pending.count >= describesInFlight, let (key, description) = try await group.next() {
                    descriptions[key] = description
                }
            }
            for try await (key, description) in group { descriptions[key] = description }
            return descriptions
        }
    }

    /// The broker's description of a key; nil for a key neither registered nor set.
    static func description(
        of key: SettingPath, in store: BusSettingsStore
    ) async throws(SettingsError) -> SettingDescription? {
        do {
            return try await store.describe(key)
        } catch {
            let unknown: SettingsError.Code = .unknownKey
            if error.code == unknown { return nil }
            throw error
        }
    }
}
