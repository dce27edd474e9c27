// SPDX-License-Identifier: Apache-2.0

// Design note: the broker's own command-line reader.
//
// The broker runs all day in every session, so it links only what it uses (decision 0030). A general
// argument parser brings Foundation's essentials and the regular-expression modules with it, about 3 MiB of
// resident text in an idle broker, for a command line of long options that scripts and unit files write. This
// reader takes `--name value`, `--name=value`, repeated options and flags, prints `--help` in the layout of
// the other SettingsBus tools, and reports a usage error by name with the usage line, for status 2.

import Glibc

/// One option of a command line, as `--help` shows it.
struct CommandOption: Sendable {
    enum Kind: Sendable {
        /// Takes one value; given again, the last wins.
        case value(name: String)
        /// Takes one value each time it is given; every value is kept, in order.
        case repeated(name: String)
        /// Takes no value.
        case flag
    }

    /// The long name, without its dashes.
    let name: String
    let kind: Kind
    let help: String
    /// What `--help` says is used when the option is not given.
    var defaultText: String?
    /// Left out of `--help` (options for tests).
    var hidden = false

    /// `--name <value>`, `--name <value> ...` or `--name`, as the usage and the help show it.
    var synopsis: String {
        switch kind {
        case .value(let value): "--\(name) <\(value)>"
        case .repeated(let value): "--\(name) <\(value)>"
        case .flag: "--\(name)"
        }
    }
}

/// A command line that is not what the command takes; `description` names what is wrong.
struct UsageError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// What a command line asked for.
enum CommandLineRequest: Sendable {
    case run(CommandLineValues)
    case help
    case version
}

/// The options given on a command line, by name.
struct CommandLineValues: Sendable {
    private var values: [String: [String]] = [:]

    fileprivate mutating func add(_ value: String, for name: String) {
        values[name, default: []].append(value)
    }

    /// The last value of a `.value` option, nil when it was not given.
    func value(_ name: String) -> String? { values[name]?.last }

    /// Every value of a `.repeated` option, in order.
    func all(_ name: String) -> [String] { values[name] ?? [] }

    /// Whether a flag was given.
    func flag(_ name: String) -> Bool { values[name] != nil }

    /// The value of `name` read by `convert`, `fallback` when it was not given; a value `convert` cannot read is
    /// a usage error naming the option and the value.
    func value<T>(_ name: String, _ fallback: T, _ what: String, _ convert: (String) -> T?) throws(UsageError) -> T {
        guard let text = value(name) else { return fallback }
        guard let converted = convert(text) else { throw UsageError("--\(name) takes \(what); not '\(text)'") }
        return converted
    }
}

/// A command's long options: reads a command line and writes the command's help.
struct CommandLineOptions: Sendable {
    let command: String
    let abstract: String
    let discussion: String
    let options: [CommandOption]

    /// Reads `arguments` (without the program's name). `--help`/`-h` and `--version` anywhere win.
    func parse(_ arguments: [String]) throws(UsageError) -> CommandLineRequest {
        if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) { return .help }
        if arguments.contains("--version") { return .version }
        var values = CommandLineValues()
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            guard argument.hasPrefix("--"), argument.count > 2 else {
                throw UsageError("Unexpected argument '\(argument)'")
            }
            let body = argument.dropFirst(2)
            let name = String(body.prefix { $0 != "=" })
            let attached = body.firstIndex(of: "=").map { String(body[body.index(after: $0)...]) }
            guard let option = options.first(where: { $0.name == name }) else {
                throw UsageError("Unknown option '--\(name)'")
            }
            switch option.kind {
            case .flag:
                guard attached == nil else { throw UsageError("--\(name) takes no value") }
                values.add("", for: name)
            case .value, .repeated:
                if let attached {
                    values.add(attached, for: name)
                } else {
                    guard index < arguments.count else { throw UsageError("Missing value for '\(option.synopsis)'") }
                    values.add(arguments[index], for: name)
                    index += 1
                }
            }
        }
        return .run(values)
    }

    /// The usage line: `Usage: COMMAND <options>`, with where to read more.
    var usage: String {
        "Usage: \(command) <options>\n  See '\(command) --help' for more information."
    }

    /// `--help`: the abstract, the discussion, the usage and every option that is not hidden, wrapped at 80
    /// columns.
    var help: String {
        var lines = ["OVERVIEW: " + abstract].flatMap { Self.wrap($0, width: 80) }
        lines.append("")
        lines += Self.wrap(discussion, width: 80)
        lines += ["", "USAGE: \(command) <options>", "", "OPTIONS:"]
        let column = 26
        var shown = options.filter { !$0.hidden }.map { ($0.synopsis, $0.help + ($0.defaultText.map { " (default: \($0))" } ?? "")) }
        shown.append(("--version", "Show the version."))
        shown.append(("-h, --help", "Show help information."))
        for (synopsis, help) in shown {
            let wrapped = Self.wrap(help, width: 80 - column)
            let lead = "  " + synopsis
            var first = 0
            if lead.count < column {
                lines.append(lead + String(repeating: " ", count: column - lead.count) + wrapped[0])
                first = 1
            } else {
                lines.append(lead)
            }
            for line in wrapped.dropFirst(first) {
                lines.append(String(repeating: " ", count: column) + line)
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `text` in lines of at most `width` characters, broken at spaces (a longer word has a line of its own).
    static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if line.isEmpty {
                line = String(word)
            } else if line.count + 1 + word.count <= width {
                line += " " + word
            } else {
                lines.append(line)
                line = String(word)
            }
        }
        lines.append(line)
        return lines
    }
}

/// The process's environment. The C variable is `environ`.
enum ProcessEnvironment {
    static var current: [String: String] {
        var environment: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return environment
    }
}
