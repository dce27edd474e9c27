// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl register FILE`: registers the schemas of a schema file.
struct RegisterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Register the type, default, summary, range and choices of keys, from a schema file.",
        discussion: """
            The file (or - for standard input) is a keyfile: [/directory/] groups, then key.field=value lines \
            with the fields type (a D-Bus signature), default (GVariant text), summary, description (plain \
            text), range (min,max), choices (a GVariant array) and secret (true or false). Example, in \
            examples/schemas/editor.schema:

              [/org/example/editor/]
              tab-width.type=u
              tab-width.default=4
              tab-width.summary=Spaces per tab
              tab-width.range=1,16

            The broker then refuses values of another type, out of the range or not among the choices. \
            Registering a key again the same way does nothing. A compatible change (summary, description, \
            default, more choices, a wider range, secret turned on) is accepted; an incompatible one (another \
            type, fewer choices, a narrower range, secret turned off) fails with status 6 naming the field, \
            unless --replace is given. 'settingsctl check' tells which a file holds without registering it.
            """)

    @OptionGroup var bus: BusOptions

    @Flag(help: "Accept incompatible changes of registered schemas (stored values they refuse are kept, not served).")
    var replace = false

    @Argument(help: ArgumentHelp("The schema file, or - for standard input.", valueName: "file"), completion: .file())
    var file: String

    func run() async throws {
        let schemas = try SchemaFile.read(file)
        try await bus.withStore { store in try await store.register(schemas, replacing: replace) }
    }
}
