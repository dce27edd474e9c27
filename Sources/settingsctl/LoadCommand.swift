// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import Foundation
import SettingsBus
import SettingsModel

/// `settingsctl load DIR [--replace]`: writes a dump, in one atomic commit.
struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Set the keys of a dconf-style keyfile (as dump prints it) under a directory, all at once.",
        discussion: """
            Reads standard input, or --file. Each value is read with the type its GVariant text has, as dconf \
            load does, so a dconf dump loads with its types: `dconf dump / | settingsctl load /`. Everything \
            is written in one Apply: if one value is refused (a type mismatch with a registered key, a value \
            out of range), nothing is written. With --replace, the keys under DIR that the input does not \
            set are reset in the same commit. A secret key's schema, which dump writes in '#schema' lines, is \
            registered first, unless the broker has the key registered as secret already, so that its value \
            stays out of Changed signals; a schema that conflicts with the registered one stops the load \
            before anything is written.
            """)

    @OptionGroup var bus: BusOptions

    @Flag(help: "Also reset every key under DIR that the input does not set.")
    var replace = false

    @Option(
        name: .shortAndLong, help: ArgumentHelp("Read this file instead of standard input.", valueName: "path"),
        completion: .file())
    var file: String?

    @Argument(
        help: ArgumentHelp("The directory the keyfile's groups are relative to, ending in '/'.", valueName: "dir"),
        completion: KeyCompletion.directories)
    var directory: String

    func run() async throws {
        let directory = try Arguments.directory(directory)
        let text = try Self.read(file)
        let contents = try DconfKeyfile.parse(text, under: directory)
        let values = contents.values
        guard !values.isEmpty || replace || !contents.schemas.isEmpty else { return }
        let request = Settings1.ApplyRequest(
            sets: values.map { ($0.0, $0.1) }, resets: replace ? [.directory(directory)] : [])
        try await bus.withStore { store in
            try await Self.keepSecret(contents.schemas, in: store)
            _ = try await store.call(request)
        }
    }

    /// Registers the schemas of the input's secret keys, except those the broker has registered as secret
    /// already (whose schema may have changed since the dump was made).
    static func keepSecret(_ schemas: [SettingPath: SettingSchema], in store: BusSettingsStore) async throws {
        var missing: [SettingPath: SettingSchema] = [:]
        for (key, schema) in schemas where schema.isSecret {
            let registered = try await registeredSchema(of: key, in: store)
            if registered?.isSecret != true { missing[key] = schema }
        }
        if !missing.isEmpty { try await store.register(missing, replacing: false) }
    }

    /// The schema the broker has registered for a key; nil for a key neither registered nor set.
    static func registeredSchema(
        of key: SettingPath, in store: BusSettingsStore
    ) async throws(SettingsError) -> SettingSchema? {
        do {
            return try await store.describe(key).schema
        } catch {
            let unknown: SettingsError.Code = .unknownKey
            if error.code == unknown { return nil }
            throw error
        }
    }

    /// The text of a file, or of standard input when `path` is nil or `-`.
    static func read(_ path: String?) throws(CtlError) -> String {
        let data: Data
        if let path, path != "-" {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw CtlError(.failure, "cannot read \(path): no such file, or not readable")
            }
            data = contents
        } else {
            data = FileHandle.standardInput.readDataToEndOfFile()
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CtlError(.invalid, "\(path ?? "standard input") is not UTF-8 text")
        }
        return text
    }
}
