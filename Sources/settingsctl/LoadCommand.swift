// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import Foundation
import SettingsBus
import SettingsModel

/// `settingsctl load DIR [--replace] [--skip-refused]`: writes a dump, in one atomic commit.
struct LoadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "load",
        abstract: "Set the keys of a dconf-style keyfile (as dump prints it) under a directory, all at once.",
        discussion: """
            Reads standard input, or --file. A key the broker has registered (its own schemas, and the GSettings \
            schemas it reads) has its value read as its registered type, and checked against its range and \
            choices before anything is written; any other key's value has the type its GVariant text has, as \
            dconf load does. A GSettings maybe value (`@ms 'x'`, `@ms nothing`) is stored as an array of one \
            element or none, as GSettings apps store it through the broker. So a dconf database moves with \
            its types: `dconf dump / | settingsctl load /`. Everything is written in one Apply. A key that \
            cannot be stored (a value out of range or not of its key's type, a path the broker's key grammar \
            refuses, an administrator's lock) is named on standard error with the reason, with every other one \
            found; then nothing is written and the status is 4 (7 when every such key is locked), or, with \
            --skip-refused, the other keys are written and the status is the same. With --replace, the keys \
            under DIR that the input does not set are reset in the same commit. A secret key's schema, which \
            dump writes in '#schema' lines, is registered first, unless the broker has the key registered as \
            secret already, so that its value stays out of Changed signals; a schema that conflicts with the \
            registered one stops the load before anything is written.
            """)

    @OptionGroup var bus: BusOptions

    @Flag(help: "Also reset every key under DIR that the input does not set.")
    var replace = false

    @Flag(help: "Write the keys that can be stored when some cannot (those are still listed, and the status is not 0).")
    var skipRefused = false

    @Option(
        name: .shortAndLong, help: ArgumentHelp("Read this file instead of standard input.", valueName: "path"),
        completion: .file())
    var file: String?

    @Argument(
        help: ArgumentHelp("The directory the keyfile's groups are relative to, ending in '/'.", valueName: "dir"),
        completion: KeyCompletion.directories)
    var directory: String

    /// A key of the input that cannot be stored, and why.
    struct Refusal: Sendable {
        var line: Int
        var message: String
        var status: ExitStatus
    }

    func run() async throws {
        let directory = try Arguments.directory(directory)
        let contents = try KeyfileInput.read(file, under: directory)
        guard !contents.entries.isEmpty || replace || !contents.schemas.isEmpty else { return }
        try await bus.withStore { store in
            try await Self.keepSecret(contents.schemas, in: store)
            let keys = contents.entries.compactMap { try? $0.key.get() }
            let descriptions = try await Describing.descriptions(of: keys, in: store)
            let (values, refusals) = Self.values(of: contents.entries, described: descriptions)
            if !refusals.isEmpty, !skipRefused {
                throw Self.failure(refusals, "nothing was written (--skip-refused writes the others)")
            }
            if !values.isEmpty || replace {
                let request = Settings1.ApplyRequest(
                    sets: values.map { ($0.0, $0.1) }, resets: replace ? [.directory(directory)] : [])
                _ = try await store.call(request)
            }
            if !refusals.isEmpty {
                throw Self.failure(
                    refusals, values.count == 1 ? "the 1 other key was written" : "the \(values.count) others were written")
            }
        }
    }

    /// The values of the entries, each read as its key's registered type and checked against its schema; and
    /// the entries that cannot be stored.
    static func values(
        of entries: [Keyfile.TextEntry], described descriptions: [SettingPath: SettingDescription]
    ) -> (values: [(SettingPath, DBusValue)], refusals: [Refusal]) {
        var values: [(SettingPath, DBusValue)] = []
        var refusals: [Refusal] = []
        for entry in entries {
            let key: SettingPath
            switch entry.key {
            case .success(let found): key = found
            case .failure(let error):
                refusals.append(
                    Refusal(
                        line: entry.line, message: "\(entry.path) is not a key the broker can store: \(error.message)",
                        status: .invalid))
                continue
            }
            let description = descriptions[key]
            let schema = description?.schema
            let value: DBusValue
            do throws(DconfValue.Problem) {
                value = try DconfValue.parse(entry.text, as: schema?.type)
            } catch {
                refusals.append(Refusal(line: entry.line, message: "the value of \(key) is \(error)", status: .invalid))
                continue
            }
            do throws(SettingsError) {
                try schema?.validate(value, for: key)
            } catch {
                refusals.append(Refusal(line: entry.line, message: error.message, status: ExitStatus(error.code)))
                continue
            }
            if let description, !description.isWritable {
                let lock = description.lock.map { " (\($0))" } ?? ""
                refusals.append(
                    Refusal(
                        line: entry.line, message: "\(key) is locked by the administrator\(lock)", status: .notWritable))
                continue
            }
            values.append((key, value))
        }
        return (values, refusals)
    }

    /// The error that lists the keys that cannot be stored, one a line: status 7 when each is locked, else 4.
    static func failure(_ refusals: [Refusal], _ outcome: String) -> CtlError {
        let status: ExitStatus = refusals.allSatisfy { $0.status == .notWritable } ? .notWritable : .invalid
        let count = refusals.count == 1 ? "1 key" : "\(refusals.count) keys"
        let lines = refusals.map { "line \($0.line): \($0.message)" }
        return CtlError(status, "\(count) cannot be stored, \(outcome):\n" + lines.joined(separator: "\n"))
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
        try await Describing.description(of: key, in: store)?.schema
    }
}
