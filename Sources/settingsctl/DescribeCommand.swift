// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl describe KEY`: prints what the broker knows about a key.
struct DescribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "describe",
        abstract: "Print a key's type, value, default, summary, range, choices and whether it can be written.",
        discussion: """
            One 'field: value' line per field the broker's Describe reports; values are in GVariant text. \
            With --json, one object: values (value, default, range, choices) as {"type", "value", "text"}, \
            the other fields as plain JSON.
            """)

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    @Argument(help: "The key, such as /org/example/editor/theme.", completion: KeyCompletion.keys)
    var key: String

    /// The order fields are printed in; fields not listed follow, sorted.
    static let order = [
        "signature", "value", "default", "summary", "description", "range", "choices", "registered", "writable",
        "secret", "serial", "value-ignored",
    ]
    /// Fields that hold settings values.
    static let valueFields: Set<String> = ["value", "default", "range", "choices"]

    func run() async throws {
        let key = try Arguments.key(key)
        let reply = try await bus.withStore { store in try await store.call(Settings1.DescribeRequest(key: key)) }
        let fields = reply.fields.dictionary
        let names =
            Self.order.filter { fields[$0] != nil }
            + fields.keys.filter { !Self.order.contains($0) }.sorted()
        if output.json {
            let members = names.map { name -> (String, JSONValue) in
                let value = fields[name]!
                return (name, Self.valueFields.contains(name) ? JSONValue.record(value) : JSONValue(value))
            }
            Output.json(JSONValue.object([("key", .string(key.rawValue))] + members))
        } else {
            let width = (names + ["key"]).map(\.count).max()! + 2
            func line(_ name: String, _ text: String) -> String {
                (name + ":").padding(toLength: width) + text
            }
            var lines = [line("key", key.rawValue)]
            for name in names {
                let value = fields[name]!
                if Self.valueFields.contains(name) {
                    lines.append(line(name, GVariantText.format(value)))
                } else if case .string(let text) = value {
                    lines.append(line(name, text))
                } else {
                    lines.append(line(name, GVariantText.format(value, annotateTypes: false)))
                }
            }
            Output.lines(lines)
        }
    }
}

extension String {
    /// The text padded with spaces to at least `length` characters.
    fileprivate func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}
