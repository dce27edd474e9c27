// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import SettingsModel

/// `settingsctl edit [DIR]`: the settings editor in the browser, served by `settings-editor` (beside
/// `settingsctl`), which this process becomes.
struct EditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Open the settings editor in your browser (served by settings-editor on 127.0.0.1).",
        discussion: """
            settingsctl becomes settings-editor, installed beside it, which serves the editor on 127.0.0.1 at a \
            random port and opens it with xdg-open; it serves until SIGINT (Ctrl-C) or SIGTERM. The address \
            carries a one-time token: only the browser that opens it first gets in. xdg-open is handed a page \
            in a file only you can read ($XDG_RUNTIME_DIR/settings-editor/, removed when the editor ends) \
            that forwards to the address, so that the token is in no process's arguments. With --no-browser \
            the address is the first line of standard output instead. The editor writes with your own rights, and \
            the broker judges every write. See docs/editor.md.
            """)

    @OptionGroup var bus: BusOptions

    @Option(help: ArgumentHelp("A D-Bus address to use as the bus (the same as --bus ADDRESS).", valueName: "address"))
    var address: String?

    @Flag(help: "Print the editor's address, with its one-time token, as the first line of standard output instead of opening a browser.")
    var noBrowser = false

    @Argument(
        help: ArgumentHelp("The directory the editor opens at (default: /).", valueName: "dir"),
        completion: KeyCompletion.directories)
    var directory: String?

    func run() async throws {
        if let directory { _ = try Arguments.directory(directory) }
        let own = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let editor = own.deletingLastPathComponent().appendingPathComponent("settings-editor").path
        guard FileManager.default.isExecutableFile(atPath: editor) else {
            throw CtlError(.failure, "settings-editor is not installed beside settingsctl (\(editor))")
        }
        var arguments = [editor, "--bus", address ?? bus.bus]
        if noBrowser { arguments.append("--no-browser") }
        if let directory { arguments.append(directory) }
        // The editor takes this process's place: its signals, its output and its exit status are the verb's.
        let cArguments = arguments.map { strdup($0) } + [nil]
        execv(editor, cArguments)
        let reason = String(cString: strerror(errno))
        throw CtlError(.failure, "settings-editor could not be started: \(reason)")
    }
}
