// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// The `--bus` option every verb takes, and the store it opens.
struct BusOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The bus: session (the default: $DBUS_SESSION_BUS_ADDRESS), system, or a D-Bus address such as "
                + "unix:path=/run/user/1000/bus.",
            valueName: "bus"),
        completion: .list(["session", "system"]))
    var bus: String = "session"

    /// The bus to connect to.
    var choice: BusSettingsStore.Bus { Self.choice(bus) }

    /// The bus an option's value names.
    static func choice(_ bus: String) -> BusSettingsStore.Bus {
        switch bus {
        case "session": .session
        case "system": .system
        default: .address(bus)
        }
    }

    /// Runs `body` with a store on the chosen bus, and closes the store however `body` ends.
    func withStore<T>(_ body: (BusSettingsStore) async throws -> T) async throws -> T {
        let store = BusSettingsStore(bus: choice)
        do {
            let result = try await body(store)
            await store.close()
            return result
        } catch {
            await store.close()
            throw error
        }
    }
}

/// The `--json` flag of the verbs that print values.
struct JSONOption: ParsableArguments {
    @Flag(help: "Print JSON: each value as {\"type\", \"value\", \"text\"} (see settingsctl(1), JSON OUTPUT).")
    var json = false
}

/// Validation of the paths given on the command line.
enum Arguments {
    /// A key; a malformed one exits with status 4.
    static func key(_ text: String) throws(SettingsError) -> SettingPath {
        try SettingPath(text)
    }

    /// A directory; text without the trailing `/` gets a hint.
    static func directory(_ text: String) throws(SettingsError) -> SettingDirectory {
        if !text.hasSuffix("/"), SettingPath.isValidKey(text) {
            throw .invalidKey("'\(text)' is a key, not a directory: a directory ends with '/' (\(text)/)")
        }
        return try SettingDirectory(text)
    }
}
