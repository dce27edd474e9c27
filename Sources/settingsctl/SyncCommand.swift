// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import Foundation
import SettingsBus
import SettingsModel

/// `settingsctl sync`: the broker's sync across machines (docs/sync.md).
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Print the state of the broker's sync across machines; with --follow, each time it changes.",
        discussion: """
            The sync fields of the broker's Status: sync-state (connected, polling, offline, error, starting \
            or stopped), sync-machine, sync-database, sync-queued (changes waiting to be pushed), sync-last, \
            sync-cursor, sync-error, sync-clamped-machines and sync-refused (remote changes this machine's \
            schemas refused). 'sync: off' when the broker does not sync. \
            To put back the store as it was before sync began, stop the broker and run \
            settings-broker --sync-restore.
            """)

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    @Flag(help: "Keep running, and print the fields again whenever they change (looked at twice a second).")
    var follow = false

    func run() async throws {
        let json = output.json
        let follow = follow
        try await bus.withStore { store in
            var last: [(name: String, value: DBusValue)]?
            repeat {
                let fields = try await StatusCommand.fields(store).filter { $0.name.hasPrefix("sync-") }
                if last == nil || !fields.elementsEqual(last!, by: { $0.name == $1.name && $0.value == $1.value }) {
                    Self.print(fields, json: json)
                    last = fields
                }
                if follow { try await Task.sleep(for: .milliseconds(500)) }
            } while follow
        }
    }

    static func print(_ fields: [(name: String, value: DBusValue)], json: Bool) {
        if json {
            Output.json(JSONValue.object(fields.map { ($0.name, JSONValue($0.value)) }))
            return
        }
        guard !fields.isEmpty else {
            Output.lines(["sync: off"])
            return
        }
        let width = fields.map(\.name.count).max()! + 2
        var lines = fields.map { field in
            let label = field.name + ":"
            let text: String
            if case .string(let string) = field.value {
                text = string
            } else if field.name == "sync-last", case .int64(let milliseconds) = field.value {
                text = Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
            } else {
                text = GVariantText.format(field.value, annotateTypes: false)
            }
            return label + String(repeating: " ", count: width - label.count) + text
        }
        lines.append("")
        Output.lines(lines)
    }
}
