// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import Foundation
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
            `dconf load DIR`, and `dconf dump DIR | settingsctl load DIR` copies dconf's settings. The value of \
            a key registered as secret is left out unless --include-secrets; either way its schema is written \
            as '#schema name.field=…' comment lines, which `settingsctl load` registers, so the key stays secret \
            where the dump is loaded (and other readers skip them as comments). A key that a GSettings schema \
            source declares with a maybe type (found as GSettings apps find them: $GSETTINGS_SCHEMA_DIR, then \
            glib-2.0/schemas under $XDG_DATA_HOME and $XDG_DATA_DIRS), which the broker stores as an array of \
            no element or one, is written as dconf holds it (`@ms nothing`, `@ms 'x'`), so that \
            `settingsctl dump / | dconf load /` moves the settings back to dconf. A key nobody set is dumped \
            with the default it reads (its schema's, or the administrator's), unless --user-values.
            """)

    @OptionGroup var bus: BusOptions

    @Flag(help: "Also write the values of keys registered as secret (the dump then holds them in clear).")
    var includeSecrets = false

    @Flag(
        help: "Only the keys set by a user, as dconf dump prints them: not those that read a schema's or the administrator's default.")
    var userValues = false

    @Argument(
        help: ArgumentHelp("The directory, ending in '/'.", valueName: "dir"), completion: KeyCompletion.directories)
    var directory: String

    func run() async throws {
        let directory = try Arguments.directory(directory)
        let (snapshot, descriptions) = try await bus.withStore { store in
            let snapshot = try await store.readTree(directory)
            return (snapshot, try await Describing.descriptions(of: Array(snapshot.values.keys), in: store))
        }
        var values = snapshot.values
        if userValues {
            values = values.filter { descriptions[$0.key]?.source == "user" }
        }
        var secrets: [SettingPath: SettingSchema] = [:]
        for (key, description) in descriptions where values[key] != nil {
            if let schema = description.schema, schema.isSecret { secrets[key] = schema }
        }
        // The GSettings sources are read only when a value could be a maybe: an array of no element or one.
        let maybes =
            values.values.contains { GSettingsMaybes.format($0) != nil }
            ? GSettingsMaybes.keys(in: GSettingsMaybes.folders(environment: ProcessInfo.processInfo.environment)) : []
        Output.write(
            DconfKeyfile.format(
                values, under: directory, secrets: secrets, includeSecrets: includeSecrets, maybes: maybes))
    }
}
