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
            set are reset in the same commit.
            """)

    @OptionGroup var bus: BusOptions

    @Flag(help: "Also reset every key under DIR that the input does not set.")
    var replace = false

    @Option(
        name: .shortAndLong, help: ArgumentHelp("Read this file instead of standard input.", valueName: "path"),
        completion: .file())
    var file: String?

    @Argument(
        help: ArgumentHelp("The directory the keyfile's groups are relative to, ending in '/'.", valueName: "dir"))
    var directory: String

    func run() async throws {
        let directory = try Arguments.directory(directory)
        let text = try Self.read(file)
        let values = try DconfKeyfile.parse(text, under: directory)
        guard !values.isEmpty || replace else { return }
        let request = Settings1.ApplyRequest(
            sets: values.map { ($0.0, $0.1) }, resets: replace ? [.directory(directory)] : [])
        try await bus.withStore { store in _ = try await store.call(request) }
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
