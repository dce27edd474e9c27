// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl get KEY`: prints a key's effective value.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print the value of a key: its user value, else its registered default.",
        discussion: """
            The value is printed in GVariant text with type annotations (uint32 7, @as []), as dconf read \
            prints it, so it can be given back to set. Exits with status 3 when the key has no value.
            """,
        aliases: ["read"])

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    @Argument(help: "The key, such as /org/example/editor/theme.", completion: KeyCompletion.keys)
    var key: String

    func run() async throws {
        let key = try Arguments.key(key)
        let value = try await bus.withStore { store in try await store.call(Settings1.GetRequest(key: key)).value }
        if output.json {
            Output.json(JSONValue.object([("key", .string(key.rawValue))] + Self.members(of: JSONValue.record(value))))
        } else {
            Output.lines([GVariantText.format(value)])
        }
    }

    /// The members of a JSON object.
    static func members(of object: JSONValue) -> [(String, JSONValue)] {
        if case .object(let members) = object { return members }
        return []
    }
}
