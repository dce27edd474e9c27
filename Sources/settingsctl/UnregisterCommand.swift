// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import SettingsBus
import SettingsModel

/// `settingsctl unregister KEY [--remove-value]`: removes a key's schema.
struct UnregisterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unregister",
        abstract: "Remove the registered schema of a key.",
        discussion: """
            The key's user value is kept and read as it is, with no type, range or choices checked any more; \
            with --remove-value it is removed too, and the key has no value. A key with neither a schema nor a \
            value is an unknown key (exit status 3).
            """)

    @OptionGroup var bus: BusOptions

    @Flag(name: .customLong("remove-value"), help: "Remove the key's user value as well.")
    var removeValue = false

    @Argument(help: ArgumentHelp("The key.", valueName: "key"), completion: KeyCompletion.keys)
    var key: String

    func run() async throws {
        let key = try SettingPath(key)
        try await bus.withStore { store in
            _ = try await store.unregister(key, removingValue: removeValue)
        }
    }
}
