// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl tree DIR`: prints every key under a directory with its value.
struct TreeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tree",
        abstract: "Print every key under a directory with its value.",
        discussion: """
            One key a line, sorted: the full key, a space, the value in GVariant text (keys have no spaces, \
            so `read -r key value` splits a line). Registered defaults count as values.
            """)

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    @Argument(
        help: ArgumentHelp("The directory, ending in '/'.", valueName: "dir"), completion: KeyCompletion.directories)
    var directory: String = "/"

    func run() async throws {
        let directory = try Arguments.directory(directory)
        let snapshot = try await bus.withStore { store in try await store.readTree(directory) }
        let keys = snapshot.values.keys.sorted()
        if output.json {
            let values = keys.map { ($0.rawValue, JSONValue.record(snapshot.values[$0]!)) }
            Output.json(
                JSONValue.object([
                    ("directory", .string(directory.rawValue)), ("serial", .uint(snapshot.serial)),
                    ("values", .object(values)),
                ]))
        } else {
            Output.lines(keys.map { "\($0.rawValue) \(GVariantText.format(snapshot.values[$0]!))" })
        }
    }
}
