// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

extension DurableStore {
    /// The schema of a key as the next write will be validated against: a registration or removal accepted
    /// but not yet committed counts (a `Register` then a `SetFromString` sent without waiting parses the text
    /// as the registered type), else the committed one. Any thread.
    func registeredSchema(_ key: SettingPath) -> SettingSchema? {
        writer.withLock { state in
            if let staged = state.stagedSchemas[key] { return staged }
            return committed.withLock { $0.schemas[key] }
        }
    }
}
