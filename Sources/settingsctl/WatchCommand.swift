// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl watch KEY|DIR`: prints each change as it happens.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print each change of a key, or of the keys under a directory, as it happens.",
        discussion: """
            Like dconf watch, each change is a block: the path that changed (the key, or the common \
            directory of the keys one commit changed), then one '  name=value' line per key, the name \
            relative to that path's directory and the value in GVariant text; a key left without a value is \
            '  name (no value)'. A blank line ends the block, and each block is written at once. \
            With --json, each change is one line: {"kind", "path", "serial", "origin", "values", "removed"}. \
            Runs until interrupted; it follows the broker across restarts.
            """)

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    @Flag(help: "First print the current values, as one block, once the watch is in place.")
    var initial = false

    @Argument(
        help: ArgumentHelp("A key, or a directory ending in '/'.", valueName: "key-or-dir"), completion: KeyCompletion.keys)
    var location: String

    func run() async throws {
        let location = try SettingLocation(location)
        let json = output.json
        let initial = initial
        try await bus.withStore { store in
            // Fail at once, with the usual message and status, when the broker cannot be reached.
            switch location {
            case .key(let key): _ = try await store.read([key])
            case .directory(let directory): _ = try await store.readTree(directory)
            }
            for await update in store.updates(of: location) {
                if update.kind == .snapshot && !initial { continue }
                if json {
                    Output.write(Self.jsonLine(update, watching: location))
                } else {
                    Output.lines(Self.block(update, watching: location))
                }
            }
        }
    }

    /// The path an update reports: the key when one key changed, else the common directory.
    static func path(of update: SettingsUpdate, watching location: SettingLocation) -> SettingLocation {
        if update.kind == .snapshot { return location }
        let keys = Array(update.values.keys) + Array(update.removed)
        return SettingLocation.enclosing(keys) ?? location
    }

    /// An update as the lines of a block, the last one blank.
    static func block(_ update: SettingsUpdate, watching location: SettingLocation) -> [String] {
        let path = path(of: update, watching: location)
        let base: String
        switch path {
        case .key(let key): base = key.parent.rawValue
        case .directory(let directory): base = directory.rawValue
        }
        func relative(_ key: SettingPath) -> String { String(key.rawValue.dropFirst(base.count)) }
        var lines = [path.rawValue]
        let keys = (Array(update.values.keys) + Array(update.removed)).sorted()
        for key in keys {
            if let value = update.values[key] {
                lines.append("  \(relative(key))=\(GVariantText.format(value))")
            } else {
                lines.append("  \(relative(key)) (no value)")
            }
        }
        return lines + [""]
    }

    /// An update as one line of JSON.
    static func jsonLine(_ update: SettingsUpdate, watching location: SettingLocation) -> String {
        let kind: String
        switch update.kind {
        case .snapshot: kind = "initial"
        case .change: kind = "change"
        case .resync: kind = "resync"
        case .unavailable: kind = "unavailable"
        }
        let values = update.values.keys.sorted().map { ($0.rawValue, JSONValue.record(update.values[$0]!)) }
        let object = JSONValue.object([
            ("kind", .string(kind)), ("path", .string(path(of: update, watching: location).rawValue)),
            ("serial", .uint(update.serial)), ("origin", update.origin.map(JSONValue.string) ?? .null),
            ("values", .object(values)),
            ("removed", .array(update.removed.sorted().map { .string($0.rawValue) })),
        ])
        return object.text + "\n"
    }
}
