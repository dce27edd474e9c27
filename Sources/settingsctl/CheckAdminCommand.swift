// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import Foundation
import SettingsBus
import SettingsModel

/// `settingsctl check-admin DIR`: validates a folder of administrator files before it is deployed.
struct CheckAdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-admin",
        abstract: "Check a folder of administrator defaults and locks before deploying it.",
        discussion: """
            Reads DIR/defaults.d/*.conf (keyfiles, as 'dump' prints them) and DIR/locks.d/* (one key or \
            directory per line) as the broker reads /etc/settingsbus, and prints every problem with its file \
            and line; the broker would skip such a file whole. Like the broker, refuses a file over 1 MiB, \
            files past the first 1000 of a folder or past 16 MiB in all, and folders and files that users \
            other than root (and the user running this) can write. With --registered, also checks each default \
            against the schema the broker has registered for its key (after the conversions the broker makes, \
            such as int32 to int64): a default the schema refuses would not be served. Prints a summary last. \
            Exit status 0 when there is no problem, 4 when there is one.
            """)

    @OptionGroup var bus: BusOptions

    @Flag(help: "Also check each default against the schema the broker has registered (asks the broker).")
    var registered = false

    @Argument(help: ArgumentHelp("The folder, such as /etc/settingsbus.", valueName: "dir"), completion: .directory)
    var directory: String

    func run() async throws {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder), isFolder.boolValue else {
            throw CtlError(.failure, "\(directory) is not a folder")
        }
        var problems: [String] = []
        var files: [AdministratorLayer.FileContent] = []
        var fileCount = 0
        // Who may write the folder, the folders above it, the subfolders and the files, as the broker checks.
        let owners = FileOwners()
        if let unsafe = owners.unsafeFolder(directory, above: true) {
            problems.append("\(unsafe.path): \(unsafe.reason); the broker would read nothing through it")
        }
        for kind in [AdministratorLayer.FileKind.defaults, .locks] {
            let folder = (directory as NSString).appendingPathComponent(kind.rawValue)
            if let unsafe = owners.unsafeFolder(folder, above: false) {
                problems.append("\(unsafe.path): \(unsafe.reason); the broker would read nothing in it")
            }
            for name in BoundedFile.names(in: folder) where !AdministratorLayer.reads(name, as: kind) {
                if kind == .defaults, !name.hasPrefix(".") {
                    problems.append("\(folder)/\(name): not read: the files of defaults.d end in .conf")
                }
            }
            // Read within the broker's bounds (FileBounds): a file it would refuse is a problem here too.
            let contents = BoundedFile.readFolder(
                folder, accepting: { AdministratorLayer.reads($0, as: kind) }, owners: owners)
            problems += contents.problems.map(\.description)
            for (path, result) in contents.files {
                fileCount += 1
                let text: String
                do throws(FileProblem) {
                    text = try result.get()
                } catch {
                    problems.append(error.description)
                    continue
                }
                let found = AdministratorLayer.problems(in: text, as: kind, file: path)
                problems += found.map(\.description)
                if found.isEmpty, let content = try? AdministratorLayer.parse(text, as: kind, file: path) {
                    files.append(content)
                }
            }
        }
        let layer = AdministratorLayer(files: files)
        if registered {
            try await bus.withStore { store in
                for (key, entry) in layer.defaults.sorted(by: { $0.key < $1.key }) {
                    guard let schema = try? await store.describe(key).schema else { continue }
                    let value = entry.value.type == schema.type
                        ? entry.value : (entry.value.losslesslyConverted(to: schema.type) ?? entry.value)
                    if !schema.accepts(value) {
                        let reason = schema.whyNotServed(value).map { ": \($0)" } ?? ""
                        problems.append("\(entry.source.file): line \(entry.source.line): \(key): the registered schema refuses this default\(reason)")
                    }
                }
            }
        }
        var lines = problems
        lines.append(
            "\(directory): \(fileCount) file\(fileCount == 1 ? "" : "s"), \(layer.defaults.count) default"
                + "\(layer.defaults.count == 1 ? "" : "s"), \(layer.locks.count) lock\(layer.locks.count == 1 ? "" : "s"), "
                + (problems.isEmpty ? "no problem" : "\(problems.count) problem\(problems.count == 1 ? "" : "s")"))
        Output.lines(lines)
        if !problems.isEmpty {
            throw CtlError(.invalid, "\(problems.count) problem\(problems.count == 1 ? "" : "s") in \(directory)")
        }
    }
}
