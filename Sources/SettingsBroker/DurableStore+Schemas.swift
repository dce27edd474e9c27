// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

extension DurableStore {
    /// The schema registered for a key as of the last commit, if any. Any thread.
    func registeredSchema(_ key: SettingPath) -> SettingSchema? {
        committed.withLock { $0.schemas[key] }
    }
}
