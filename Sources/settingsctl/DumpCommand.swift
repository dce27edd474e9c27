// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl dump DIR`: prints a directory in `dconf dump`'s keyfile format.
struct DumpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Print every key under a directory in the keyfile format of dconf dump.",
        discussion: """
            Groups are [paths] relative to DIR ([/] holds DIR's own keys), each key a name=value line with the \
            value in GVariant text with type annotations. `settingsctl load DIR` reads it back; so does \
            `dconf load DIR`, and `dconf dump DIR | settingsctl load DIR` copies dconf's settings.
            """)

    @OptionGroup var bus: BusOptions

    @Argument(help: ArgumentHelp("The directory, ending in '/'.", valueName: "dir"))
    var directory: String

    func run() async throws {
        let directory = try Arguments.directory(directory)
        let snapshot = try await bus.withStore { store in try await store.readTree(directory) }
        Output.write(DconfKeyfile.format(snapshot.values, under: directory))
    }
}
