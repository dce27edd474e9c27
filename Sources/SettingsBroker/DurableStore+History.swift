// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

// History: what a commit that changed user values records (`HistoryLog`, in the store file), and reading it.
extension DurableStore {
    /// What the history records of a changeset's writes, read from the staged view as validation left it: each
    /// key's user value before (nil when history is off or no write changes a user value). A key registered as
    /// secret is recorded without its values; so is every key of a commit of more than
    /// ``HistoryEntry/valueLimit`` keys, and a key whose old or new value is over
    /// ``HistoryEntry/valueSizeLimit`` bytes.
    func historyEntry(_ writes: [(key: SettingPath, value: DBusValue?)], _ view: StagedView) -> HistoryEntry? {
        guard !writes.isEmpty, persistence.history.limits.isOn else { return nil }
        let large = writes.count > HistoryEntry.valueLimit
        var changed = false
        let before = writes.map { write -> (omitted: String, old: DBusValue?)? in
            let old = view.userValue(of: write.key)
            guard old != write.value else { return nil }
            changed = true
            if large || (old?.approximateSize ?? 0) > HistoryEntry.valueSizeLimit
                || (write.value?.approximateSize ?? 0) > HistoryEntry.valueSizeLimit
            {
                return ("large", nil)
            }
            if view.schema(of: write.key)?.isSecret == true { return ("secret", nil) }
            return ("", old)
        }
        return changed ? HistoryEntry(time: HistoryEntry.now(), before: before) : nil
    }

    /// Sets how much history the store keeps (``HistoryLimits``); 0 commits turns recording off.
    func setHistoryLimits(_ limits: HistoryLimits) {
        persistence.history.configure(limits)
    }

    /// The kept commits a `History` request asks for, oldest first.
    ///
    /// - Throws: ``SettingsError`` `StoreFailure` when the store file cannot be read.
    func history(_ request: Settings1.HistoryRequest) async throws(SettingsError) -> [Settings1.HistoryReply.Commit] {
        try await persistence.readHistory(request)
    }

    /// Records the process behind a writer's unique name, for ``history(_:)``.
    func recordWriter(origin: String, pid: UInt32, process: String) async {
        await persistence.recordWriter(origin: origin, pid: pid, process: process)
    }
}
