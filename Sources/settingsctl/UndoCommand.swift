// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl undo SERIAL`: restores what one commit of the history changed, as a new commit.
struct UndoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "undo",
        abstract: "Restore the values one commit of the history changed (see log), as a new commit.",
        discussion: """
            Each key the commit changed gets back its value from before it; a key that had no user value is \
            reset. It is refused (status 6) when a key has changed since that commit (its value is not the \
            one the commit wrote): nothing is then written. It is one Apply with if-serial, so a write that \
            races with it is never overwritten. A commit of keys registered as secret cannot be undone: the \
            history keeps no values of them.
            """)

    @OptionGroup var bus: BusOptions

    @Argument(help: "The serial of the commit, as log prints it.")
    var serial: UInt64

    func run() async throws {
        let serial = self.serial
        guard serial > 0 else { throw CtlError(.usage, "serials start at 1") }
        let applied = try await bus.withStore { store in
            // The first page from the commit on (the broker reads no further than one page), of which only the
            // commit is used: whether a key changed since is told by its value now, not by the later commits.
            let commits = try await store.call(Settings1.HistoryRequest(sinceSerial: serial - 1, limit: 0)).commits
            guard let commit = commits.first, commit.serial == serial else {
                throw CtlError(
                    .unknownKey,
                    "no commit \(serial) in the broker's history (it changed no value, or is older than what the "
                        + "history keeps: see settingsctl log)")
            }
            if let change = commit.changes.first(where: { !$0.omitted.isEmpty }) {
                throw CtlError(
                    .failure,
                    change.omitted == "secret"
                        ? "commit \(serial) changed \(change.key), a secret key: the history keeps no values of "
                            + "secret keys, so it cannot be undone"
                        : "commit \(serial) changed \(change.key) in a commit too large for the history to keep its "
                            + "values (more than 1,024 keys, a value over 16 KiB, or values over a quarter of "
                            + "settings-broker --history-size), so it cannot be undone")
            }
            // The serial first, then each key's value: Apply's if-serial then refuses anything written after
            // the values were compared.
            let current = try await store.call(
                Settings1.GetManyRequest(keys: commit.changes.compactMap { try? SettingPath($0.key) })
            ).serial
            var sets: [(key: SettingPath, value: DBusValue)] = []
            var resets: [SettingLocation] = []
            for change in commit.changes {
                let key = try SettingPath(change.key)
                let now: DBusValue?
                do {
                    now = try await store.call(Settings1.DescribeRequest(key: key)).value
                } catch let error as SettingsError where error.code == .unknownKey {
                    now = nil
                }
                guard now == change.new else {
                    throw SettingsError.conflict(
                        "\(key) changed since commit \(serial): it is \(now.map { GVariantText.format($0) } ?? "unset"), "
                            + "not \(change.new.map { GVariantText.format($0) } ?? "unset") as that commit left it; "
                            + "nothing was undone")
                }
                if let old = change.old { sets.append((key, old)) } else { resets.append(.key(key)) }
            }
            return try await store.call(
                Settings1.ApplyRequest(sets: sets, resets: resets, options: Settings1.ApplyOptions(ifSerial: current))
            ).serial
        }
        Output.lines(["undid commit \(serial) as commit \(applied)"])
    }
}
