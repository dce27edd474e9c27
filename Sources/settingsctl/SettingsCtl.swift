// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import SettingsModel

/// `settingsctl`: reads, writes and watches the settings that `settings-broker` serves on D-Bus.
///
/// Each verb is a subcommand in a file of its own. ``main()`` replaces ArgumentParser's entry point only to
/// give every failure its documented exit status (``ExitStatus``) and to accept the global `--bus` option
/// before the verb as well as after it.
@main
struct SettingsCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settingsctl",
        abstract: "Read, write and watch the settings served by settings-broker (io.github.settingsbus.Settings1).",
        discussion: """
            Keys are paths such as /org/example/editor/theme; directories end with '/'. Values are written \
            and printed in the GVariant text format of dconf and gsettings ('dark', 12, uint32 7, ['a', 'b']). \
            The first call starts the broker by D-Bus activation when it is not running.

            Every verb takes --bus session|system|<address> (default: session, which is \
            $DBUS_SESSION_BUS_ADDRESS). Verbs that print values take --json.

            Exit status:
              0  success
              1  another failure: the store could not be written, a file not read
              2  usage error: no verb, or a bad verb, option or argument; reset of a
                 directory without -r
              3  unknown key: no value and no registered default
              4  invalid: bad key or directory, unparsable value or file, type mismatch,
                 out of range or not a choice, too large
              5  broker unavailable: no bus, no broker and none could start, no answer
              6  conflict: another schema for a registered key, a lost compare-and-set,
                 undo of a commit whose keys changed since
              7  not writable: a locked key, or a call the bus policy refuses
              8  access denied: a secret key's value, which the broker gives only to
                 root, its own user and the users of its --secret-readers
            """,
        version: SettingsBusNames.packageVersion,
        subcommands: [
            GetCommand.self, SetCommand.self, ResetCommand.self, ListCommand.self, TreeCommand.self,
            DumpCommand.self, LoadCommand.self, WatchCommand.self, DescribeCommand.self, RegisterCommand.self,
            UnregisterCommand.self, CheckCommand.self, CheckAdminCommand.self, StatusCommand.self,
            SyncCommand.self, LogCommand.self, UndoCommand.self, EditCommand.self,
        ])

    /// Parses the command line, runs the verb and exits with the status of ``ExitStatus``.
    static func main() async {
        let arguments = Self.movingGlobalOptions(Array(CommandLine.arguments.dropFirst()))
        do {
            // No verb is a usage error, as for dconf: the usage goes to standard error, exit status 2.
            guard !arguments.isEmpty else { throw ValidationError("no verb given, such as get, set or dump") }
            // The asynchronous parse: it is the one that answers a shell's completion of a key (KeyCompletion).
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as SettingsError {
            Output.fail(ExitStatus(error.code), error.message)
        } catch let error as CtlError {
            Output.fail(error.status, error.message, lines: true)
        } catch {
            let code = exitCode(for: error)
            let text = fullMessage(for: error)
            if code == .success {
                if !text.isEmpty { Output.write(text + "\n") }
                Foundation.exit(0)
            }
            if !text.isEmpty { Output.writeError(text + "\n") }
            Foundation.exit(code == .validationFailure ? ExitStatus.usage.rawValue : code.rawValue)
        }
    }

    /// Moves `--bus X`, `--bus=X` and `--json` written before the verb to after it, where the verb's own
    /// options are parsed: `settingsctl --bus system get /a/b` means `settingsctl get --bus system /a/b`.
    static func movingGlobalOptions(_ arguments: [String]) -> [String] {
        var leading: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex {
            let argument = arguments[index]
            if argument == "--bus", index + 1 < arguments.endIndex {
                leading += [argument, arguments[index + 1]]
                index += 2
            } else if argument.hasPrefix("--bus=") || argument == "--json" {
                leading.append(argument)
                index += 1
            } else {
                break
            }
        }
        guard !leading.isEmpty, index < arguments.endIndex else { return arguments }
        return [arguments[index]] + leading + arguments[(index + 1)...]
    }
}
