// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import SettingsBus
import SettingsModel

/// `settingsctl check FILE`: validates a schema file, and how it changes a previous version or what a broker
/// has registered, without changing anything.
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check a schema file, and what it changes, without registering anything.",
        discussion: """
            Reads the file as 'register' does and checks every schema in it (its type, default, range and \
            choices, and the limits of values). With --previous OLD, compares it with the previous version of \
            the file, with --registered with what the broker has registered, and prints each change of each \
            key: compatible ones (summary, description, default, more choices, a wider range, secret turned \
            on) and incompatible ones (another type, fewer choices, a narrower range, secret turned off), \
            which 'register' refuses unless replacing. For package builds and CI: exit status 0 when the file \
            is sound and every change compatible, 4 for a malformed file, 6 for an incompatible change.
            """)

    @OptionGroup var bus: BusOptions

    @Option(help: ArgumentHelp("A previous version of the schema file to compare with.", valueName: "old-file"))
    var previous: String?

    @Flag(help: "Compare with the schemas the broker has registered (asks the broker; registers nothing).")
    var registered = false

    @Argument(help: ArgumentHelp("The schema file, or - for standard input.", valueName: "file"), completion: .file())
    var file: String

    func run() async throws {
        let schemas = try SchemaFile.read(file)
        var old: [SettingPath: SettingSchema] = [:]
        if let previous { old = try SchemaFile.read(previous) }
        if registered {
            try await bus.withStore { store in
                for key in schemas.keys {
                    do {
                        if let schema = try await store.describe(key).schema { old[key] = schema }
                    } catch let error as SettingsError where error.code == .unknownKey {
                        continue
                    }
                }
            }
        }
        var incompatible = 0
        var lines: [String] = []
        for (key, schema) in schemas.sorted(by: { $0.key < $1.key }) {
            guard let before = old[key] else {
                if previous != nil || registered { lines.append("\(key): new") }
                continue
            }
            for change in before.changes(to: schema) {
                if !change.isCompatible { incompatible += 1 }
                lines.append("\(key): \(change.isCompatible ? "compatible" : "INCOMPATIBLE"): \(change)")
            }
        }
        for key in old.keys.sorted() where schemas[key] == nil && previous != nil {
            lines.append("\(key): no longer in the file (its schema stays registered until unregistered)")
        }
        lines.append(
            "\(file): \(schemas.count) key\(schemas.count == 1 ? "" : "s"), "
                + (incompatible == 0 ? "no incompatible change" : "\(incompatible) incompatible change\(incompatible == 1 ? "" : "s")"))
        Output.lines(lines)
        if incompatible > 0 { throw CtlError(.conflict, "\(incompatible) incompatible change\(incompatible == 1 ? "" : "s"): register them with replacing, or keep the old schema") }
    }
}
