// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl list DIR`: prints the direct children of a directory.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the keys and subdirectories (ending in '/') directly under a directory.",
        discussion: "One name a line, sorted, as dconf list prints them. An empty or unknown directory lists nothing.")

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    @Argument(
        help: ArgumentHelp("The directory, ending in '/'.", valueName: "dir"), completion: KeyCompletion.directories)
    var directory: String = "/"

    func run() async throws {
        let directory = try Arguments.directory(directory)
        let names = try await bus.withStore { store in try await store.list(directory) }
        if output.json {
            Output.json(JSONValue.array(names.map(JSONValue.string)))
        } else {
            Output.lines(names)
        }
    }
}
