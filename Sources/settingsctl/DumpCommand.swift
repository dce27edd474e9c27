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
            `dconf load DIR`, and `dconf dump DIR | settingsctl load DIR` copies dconf's settings. The value of \
            a key registered as secret is left out unless --include-secrets; either way its schema is written \
            as '#schema name.field=…' comment lines, which `settingsctl load` registers, so the key stays secret \
            where the dump is loaded (and other readers skip them as comments).
            """)

    @OptionGroup var bus: BusOptions

    @Flag(help: "Also write the values of keys registered as secret (the dump then holds them in clear).")
    var includeSecrets = false

    @Argument(
        help: ArgumentHelp("The directory, ending in '/'.", valueName: "dir"), completion: KeyCompletion.directories)
    var directory: String

    /// The most `Describe` calls in flight at once while looking for secret keys.
    static let describesInFlight = 32

    func run() async throws {
        let directory = try Arguments.directory(directory)
        let (snapshot, secrets) = try await bus.withStore { store in
            let snapshot = try await store.readTree(directory)
            return (snapshot, try await Self.secretSchemas(of: Array(snapshot.values.keys), in: store))
        }
        Output.write(
            DconfKeyfile.format(snapshot.values, under: directory, secrets: secrets, includeSecrets: includeSecrets))
    }

    /// The schemas of the keys registered as secret among `keys`, from one `Describe` of each.
    static func secretSchemas(
        of keys: [SettingPath], in store: BusSettingsStore
    ) async throws -> [SettingPath: SettingSchema] {
        try await withThrowingTaskGroup(of: (SettingPath, SettingSchema?).self) { group in
            var secrets: [SettingPath: SettingSchema] = [:]
            var pending = keys[...]
            func collect(_ result: (SettingPath, SettingSchema?)) {
                if let schema = result.1, schema.isSecret { secrets[result.0] = schema }
            }
            while let key = pending.popFirst() {
                group.addTask { (key, try await store.describe(key).schema) }
                if keys.count - pending.count >= describesInFlight, let result = try await group.next() {
                    collect(result)
                }
            }
            for try await result in group { collect(result) }
            return secrets
        }
    }
}
