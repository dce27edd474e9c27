// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The keyfile format that `dconf dump` prints and `dconf load` reads.
///
/// ```
/// [/]
/// top-level-key=1
///
/// [editor]
/// font-size=12
/// theme='dark'
///
/// [editor/recent]
/// files=['a.txt', 'b.txt']
/// ```
///
/// Groups are directories relative to the directory dumped (`[/]` is that directory itself); each line is
/// `name=value` with the value in GVariant text with type annotations. The order is dconf's: a directory's
/// own keys first, then its subdirectories, names sorted by their bytes (a subdirectory's name with its
/// trailing `/`); empty groups are left out and groups are separated by a blank line.
///
/// A key registered as secret also has its schema in its group, as comment lines in the fields of a schema file
/// (``SchemaFile``), which dconf skips and `settingsctl load` registers; its value is left out unless asked for:
///
/// ```
/// [proxy]
/// #schema password.type=s
/// #schema password.default=''
/// #schema password.secret=true
/// # password: secret, its value is left out (settingsctl dump --include-secrets writes it)
/// port=8080
/// ```
enum DconfKeyfile {
    /// The start of a comment line that holds a field of a secret key's schema.
    static let schemaPrefix = "#schema "

    /// What a keyfile sets: values, and the schemas of its secret keys.
    struct Contents {
        /// The keys and their values' text, in the order they were first given; each value is read as its
        /// key's registered type by the one who knows it (``DconfValue``).
        var entries: [Keyfile.TextEntry] = []
        /// The schemas given in `#schema` lines.
        var schemas: [SettingPath: SettingSchema] = [:]
    }

    /// Prints the values under `directory` as `dconf dump` does; values outside it are ignored.
    ///
    /// - Parameters:
    ///   - secrets: the schemas of the keys registered as secret, written as `#schema` lines.
    ///   - includeSecrets: whether the values of those keys are written too.
    ///   - maybes: the keys GSettings declares with a maybe type, written as dconf holds them
    ///     (``GSettingsMaybes``).
    static func format(
        _ values: [SettingPath: DBusValue], under directory: SettingDirectory,
        secrets: [SettingPath: SettingSchema] = [:], includeSecrets: Bool = false, maybes: Set<SettingPath> = []
    ) -> String {
        let root = Node()
        for (key, value) in values where directory.contains(key) {
            let relative = key.rawValue.dropFirst(directory.rawValue.count).split(separator: "/").map(String.init)
            var node = root
            for segment in relative.dropLast() {
                node = node.child(segment)
            }
            let name = relative.last ?? ""
            if let schema = secrets[key] {
                node.secrets[name] = schema
                if !includeSecrets { continue }
            }
            // GVariant text leaves only the line and paragraph separators unescaped (in strings, where
            // `visible` writes them as GVariant's own `\u2028`), so the file shows no character a terminal acts on.
            node.keys[name] = Output.visible(
                (maybes.contains(key) ? GSettingsMaybes.format(value) : nil) ?? GVariantText.format(value))
        }
        var groups: [String] = []
        root.emit(path: "", into: &groups)
        return groups.joined(separator: "\n")
    }

    /// What a keyfile read as `dconf load` reads it (``SettingsModel/Keyfile``, line by line by ``KeyfileInput``)
    /// sets: every `name=value` of group `[g]` sets the key `directory + g/name` (`[/]` is `directory` itself),
    /// and the `#schema name.field=value` lines give the schemas of secret keys.
    ///
    /// Blank lines and lines starting with `#` or `;` are skipped, except `#schema` lines; white space around
    /// names and values is ignored; a key given twice keeps its last value. A key whose group or name the
    /// broker's key grammar refuses is an entry with the reason, not a problem of the file.
    ///
    /// - Parameters:
    ///   - entries: the keyfile's entries, with their lines.
    ///   - comments: its `#schema` lines, without the prefix, with their groups and lines.
    /// - Throws: ``CtlError`` with status ``ExitStatus/invalid``, naming the `#schema` line that is wrong.
    static func contents(entries: [Keyfile.TextEntry], comments: [Keyfile.Comment]) throws(CtlError) -> Contents {
        var contents = Contents(entries: entries)
        guard !comments.isEmpty else { return contents }
        // The `#schema` lines as a schema file, each group's lines under its absolute `[directory]`; `lineNumbers`
        // holds the keyfile's line of each of its lines (a group's line takes the number of its first field's).
        var schemaLines: [String] = []
        var lineNumbers: [Int] = []
        var schemaGroup: SettingDirectory?
        for comment in comments {
            if schemaGroup != comment.group {
                schemaLines.append("[\(comment.group.rawValue)]")
                lineNumbers.append(comment.line)
                schemaGroup = comment.group
            }
            schemaLines.append(comment.text)
            lineNumbers.append(comment.line)
        }
        do throws(SchemaFile.Problem) {
            contents.schemas = try SchemaFile(parsing: schemaLines.joined(separator: "\n")).schemas
        } catch {
            let line = lineNumbers.indices.contains(error.line - 1) ? lineNumbers[error.line - 1] : error.line
            throw CtlError(.invalid, "a #schema \(SchemaFile.Problem(line: line, message: error.message))")
        }
        return contents
    }

    /// The `#schema` lines of a key's schema, in the fields of a schema file.
    static func schemaLines(_ name: String, _ schema: SettingSchema) -> [String] {
        func line(_ field: String, _ text: String) -> String {
            "\(schemaPrefix)\(name).\(field)=\(Output.visible(text.replacing("\n", with: " ")))"
        }
        var lines = [line("type", schema.type.signatureText)]
        if let defaultValue = schema.defaultValue { lines.append(line("default", GVariantText.format(defaultValue))) }
        if let summary = schema.summary { lines.append(line("summary", summary)) }
        if let description = schema.description { lines.append(line("description", description)) }
        if let range = schema.range { lines.append(line("range", GVariantText.format(.structure([range.min, range.max])))) }
        if let choices = schema.choices { lines.append(line("choices", GVariantText.format(.array(schema.type, choices)))) }
        lines.append(line("secret", schema.isSecret ? "true" : "false"))
        return lines
    }

    /// One directory of the tree being printed.
    private final class Node {
        /// The values' text, by name.
        var keys: [String: String] = [:]
        /// The schemas of this directory's secret keys, by name.
        var secrets: [String: SettingSchema] = [:]
        var children: [String: Node] = [:]

        func child(_ name: String) -> Node {
            if let existing = children[name] { return existing }
            let made = Node()
            children[name] = made
            return made
        }

        /// Appends this directory's group, then its subdirectories' groups, in dconf's order.
        func emit(path: String, into groups: inout [String]) {
            if !keys.isEmpty || !secrets.isEmpty {
                var lines = ["[\(path.isEmpty ? "/" : path)]"]
                for name in Set(keys.keys).union(secrets.keys).sorted(by: Self.byBytes) {
                    if let schema = secrets[name] {
                        lines += DconfKeyfile.schemaLines(name, schema)
                        if keys[name] == nil {
                            lines.append(
                                "# \(name): secret, its value is left out (settingsctl dump --include-secrets writes it)")
                        }
                    }
                    if let value = keys[name] { lines.append("\(name)=\(value)") }
                }
                groups.append(lines.joined(separator: "\n") + "\n")
            }
            for name in children.keys.sorted(by: { Self.byBytes($0 + "/", $1 + "/") }) {
                children[name]!.emit(path: path.isEmpty ? name : path + "/" + name, into: &groups)
            }
        }

        static func byBytes(_ lhs: String, _ rhs: String) -> Bool {
            lhs.utf8.lexicographicallyPrecedes(rhs.utf8)
        }
    }
}
