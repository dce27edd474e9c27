// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl reset [-r] KEY|DIR`: removes user values.
struct ResetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract: "Remove the user value of a key, or with -r of every key under a directory.",
        discussion: """
            A reset key reads its registered default again, or has no value. Resetting a directory needs -r \
            (dconf spells it -f; both are accepted), so that a slip of the keyboard cannot reset a whole tree.
            """)

    @OptionGroup var bus: BusOptions

    @Flag(
        name: [.customShort("r"), .customShort("f"), .customLong("recursive")],
        help: "Reset every key under DIR.")
    var recursive = false

    @Argument(
        help: ArgumentHelp("A key, or a directory ending in '/'.", valueName: "key-or-dir"), completion: KeyCompletion.keys)
    var location: String

    func run() async throws {
        let location = try SettingLocation(location)
        if case .directory(let directory) = location, !recursive {
            throw CtlError(.usage, "\(directory) is a directory: reset -r \(directory) resets every key under it")
        }
        try await bus.withStore { store in
            _ = try await store.call(Settings1.ResetRequest(location: location))
        }
    }
}
