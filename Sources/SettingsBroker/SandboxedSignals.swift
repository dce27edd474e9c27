// SPDX-License-Identifier: Apache-2.0

import DBus
import Logging
import SettingsModel

/// The signals of the sandboxed apps' name (``SettingsModel/SettingsBusNames/sandboxedBusName``): each commit's
/// `Changed` and `DescriptionChanged`, cut to what each sandboxed caller may read, sent to that caller alone
/// (decision 0033). That name never broadcasts, so a sandbox that may talk only to it, through
/// `xdg-dbus-proxy`, receives no other app's changes.
final class SandboxedSignals: Sendable {
    private let connection: DBusConnection
    private let confinement: Confinement
    private let logger: Logger

    init(connection: DBusConnection, confinement: Confinement, logger: Logger) {
        self.connection = connection
        self.confinement = confinement
        self.logger = logger
    }

    /// Sends what a commit changed to each sandboxed caller that may read some of it.
    func send(_ change: CommittedChange) {
        let listeners = confinement.peers.listeners
        guard !listeners.isEmpty else { return }
        let shared = confinement.shared.list
        for (name, app) in listeners {
            guard let destination = try? BusName(name) else { continue }
            let reads = { (key: String) in (try? SettingPath(key)).map { app.reads($0, shared: shared) } ?? false }
            if change.changesValues {
                var cut = change
                cut.values = change.values.filter { reads($0.key) }
                cut.removed = change.removed.filter(reads)
                cut.secretKeys = change.secretKeys.filter(reads)
                if cut.changesValues {
                    if cut != change { cut.path = Self.location(of: cut) }
                    var signal = SettingsInterface.changedSignal(cut)
                    signal.destination = destination
                    emit(signal, "Changed", to: name)
                }
            }
            var described = change
            described.describedKeys = change.describedKeys.filter { reads($0.rawValue) }
            if var signal = SettingsInterface.descriptionChangedSignal(described) {
                signal.destination = destination
                emit(signal, "DescriptionChanged", to: name)
            }
        }
    }

    /// The key when one key is left, else the longest directory that holds them all.
    private static func location(of change: CommittedChange) -> SettingLocation {
        let keys = (change.values.map(\.key) + change.removed + change.secretKeys).compactMap { try? SettingPath($0) }
        if Set(keys).count == 1, let key = keys.first { return .key(key) }
        return .directory(SettingDirectory.commonDirectory(of: keys) ?? .root)
    }

    private func emit(_ signal: DBusMessage, _ member: String, to name: String) {
        do { try connection.send(signal) } catch {
            logger.error("cannot send \(member) to a sandboxed app", metadata: ["name": "\(name)", "error": "\(error)"])
        }
    }
}
