// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl set KEY VALUE`: sets a key from GVariant text.
struct SetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Set a key from GVariant text.",
        discussion: """
            The broker parses VALUE against the key's registered type, so a registered key needs no \
            annotations: set /org/example/volume 0.5, set /org/example/tab-width 8, \
            set /org/example/recent "['a', 'b']". A key that is not registered takes the type the text has: \
            5 is an int32, 5.0 a double, 'x' a string; write int64 5, uint32 5 or @as [] for other types. \
            A registered string key takes a bare word as gsettings does: set /org/example/theme dark (text \
            that is not a string in GVariant text is taken as the string itself); any other string needs its \
            quotes: set /org/example/note "'dark'". A negative number may be written as it is: \
            set /org/example/offset -5.
            """,
        aliases: ["write"])

    @OptionGroup var bus: BusOptions

    @Argument(help: "The key, such as /org/example/editor/theme.", completion: KeyCompletion.keys)
    var key: String

    // Collected this way so that a value such as -5 is not taken for an option.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The value, in GVariant text.", valueName: "value"))
    var value: [String] = []

    func validate() throws {
        guard value.count == 1 else {
            throw ValidationError(
                value.isEmpty
                    ? "Missing expected argument '<value>'"
                    : "set takes one value; quote a value that has spaces: \"['a', 'b']\"")
        }
    }

    func run() async throws {
        let key = try Arguments.key(key)
        let text = value[0]
        try await bus.withStore { store in
            do {
                _ = try await store.setFromString(key, text)
            } catch let error as SettingsError where error.code == .invalidValue || error.code == .typeMismatch {
                guard let literal = try await Self.bareWord(text, for: key, in: store, refused: error) else { throw error }
                _ = try await store.setFromString(key, literal)
            }
        }
    }

    /// The text as a quoted GVariant string when the key is registered as a string (`s`), as gsettings takes a
    /// bare word; nil when it is not. For a key that is not registered, text that would be a string with quotes
    /// fails with a hint saying so.
    static func bareWord(
        _ text: String, for key: SettingPath, in store: BusSettingsStore, refused: SettingsError
    ) async throws(SettingsError) -> String? {
        let schema: SettingSchema?
        do throws(SettingsError) {
            schema = try await store.describe(key).schema
        } catch where error.code == .unknownKey {
            schema = nil
        }
        if let schema {
            return schema.type == .string ? GVariantText.format(.string(text)) : nil
        }
        let word = !text.isEmpty && text.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) }
        guard word else { return nil }
        throw SettingsError(
            refused.code,
            "\(refused.message); \(key) is not registered, so a string needs its quotes: \"'\(text)'\"")
    }
}
