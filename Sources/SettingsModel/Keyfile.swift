// SPDX-License-Identifier: Apache-2.0

public import DBus

/// The keyfile format that `dconf dump` prints, `dconf load` and `settingsctl load` read, and administrators
/// write in `defaults.d/` (``AdministratorLayer``).
///
/// ```
/// [/]
/// top-level-key=1
///
/// [editor]
/// font-size=12
/// theme='dark'
/// ```
///
/// Groups are directories relative to the directory the file is read under (`[/]` is that directory itself;
/// `[editor]` and `[/editor/]` are the same group); each line is `name=value` with the value in GVariant text
/// with type annotations. Blank lines and lines starting with `#` or `;` are skipped; white space around
/// names and values is ignored; a key given twice keeps its last value.
public enum Keyfile {
    /// What is wrong with a keyfile, and on which line.
    public struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// The line, counted from 1.
        public var line: Int
        /// What is wrong, for people.
        public var message: String

        /// `line N: message`.
        public var description: String { "line \(line): \(message)" }
    }

    /// Reads a keyfile: every `name=value` of group `[g]` sets the key `directory + g/name` to the value parsed
    /// from its GVariant text, with the type that text has.
    ///
    /// - Returns: each key with its value and the line that gave it, in the order the keys were first given.
    /// - Throws: the first ``Problem``.
    public static func parse(
        _ text: String, under directory: SettingDirectory
    ) throws(Problem) -> [(key: SettingPath, value: DBusValue, line: Int)] {
        let (entries, problems, _) = read(text, under: directory, stoppingAtFirstProblem: true)
        if let first = problems.first { throw first }
        return entries
    }

    /// A comment line kept by ``parse(_:under:keepingComments:)``.
    public struct Comment: Sendable, Hashable {
        /// The group the line is in.
        public var group: SettingDirectory
        /// The line, counted from 1.
        public var line: Int
        /// The line's text without the prefix it was kept for, and without white space at either end.
        public var text: String
    }

    /// Reads a keyfile as ``parse(_:under:)`` does, and keeps the comment lines that start with `prefix` (such
    /// as `#schema `), each with its group.
    ///
    /// - Throws: the first ``Problem``; a kept comment before the first group is one.
    public static func parse(
        _ text: String, under directory: SettingDirectory, keepingComments prefix: String
    ) throws(Problem) -> (entries: [(key: SettingPath, value: DBusValue, line: Int)], comments: [Comment]) {
        let (entries, problems, comments) = read(
            text, under: directory, stoppingAtFirstProblem: true, keepingComments: prefix)
        if let first = problems.first { throw first }
        return (entries, comments)
    }

    /// Reads a keyfile as ``parse(_:under:)`` does, but goes on after a problem: the lines of a group whose
    /// `[group]` line is wrong are passed over.
    ///
    /// - Returns: the entries of the lines that are right, and every problem, in the order of the lines.
    public static func parseAll(
        _ text: String, under directory: SettingDirectory
    ) -> (entries: [(key: SettingPath, value: DBusValue, line: Int)], problems: [Problem]) {
        let (entries, problems, _) = read(text, under: directory, stoppingAtFirstProblem: false)
        return (entries, problems)
    }

    /// A `name=value` line as written: the key it names and its value's text, not yet parsed.
    public struct TextEntry: Sendable {
        /// The key's path as the file gives it: the directory read under, the group and the name.
        public var path: String
        /// The key, or why `path` is not one (a group or name with characters the key grammar refuses, such as
        /// dconf's `profiles:/`).
        public var key: Result<SettingPath, SettingsError>
        /// The value's GVariant text, without white space at either end.
        public var text: String
        /// The line, counted from 1.
        public var line: Int
    }

    /// Reads a keyfile's lines without parsing their values, so that a reader that knows the keys' types can
    /// read each value as its key's type.
    ///
    /// A key given twice keeps its last text (in the place of its first). Unlike ``parse(_:under:)``, a group
    /// or a name that is not a key of the broker's grammar is not a problem of the file: the entries under it
    /// are returned with the reason in ``TextEntry/key``, so that the reader can name each key it cannot store.
    ///
    /// - Parameter prefix: comment lines starting with it are kept, each with its group (those of a group that
    ///   is not a directory are dropped with the group's entries' values).
    /// - Throws: the first ``Problem`` of the file's shape: a line that is neither `[group]` nor `name=value`,
    ///   or a line before the first group.
    public static func parseTexts(
        _ text: String, under directory: SettingDirectory, keepingComments prefix: String? = nil
    ) throws(Problem) -> (entries: [TextEntry], comments: [Comment]) {
        var group: (path: String, directory: Result<SettingDirectory, SettingsError>)?
        var order: [String] = []
        var entries: [String: TextEntry] = [:]
        var comments: [Comment] = []
        for (index, rawLine) in LineText.lines(text).enumerated() {
            let number = index + 1
            let trimmed = LineText.trimmed(rawLine)
            if let prefix, trimmed.hasPrefix(prefix) {
                guard let group else {
                    throw Problem(line: number, message: "'\(LineText.excerpt(trimmed))' comes before the first [group] line")
                }
                if case .success(let directory) = group.directory {
                    comments.append(
                        Comment(group: directory, line: number, text: LineText.trimmed(trimmed.dropFirst(prefix.count))))
                }
                continue
            }
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") { continue }
            if trimmed.hasPrefix("[") {
                guard trimmed.hasSuffix("]"), let close = trimmed.lastIndex(of: "]") else {
                    throw Problem(line: number, message: "a group line is '[path]', not '\(LineText.excerpt(trimmed))'")
                }
                let name = trimmed[trimmed.index(after: trimmed.startIndex)..<close]
                let relative = name.split(separator: "/").joined(separator: "/")
                let path = relative.isEmpty ? directory.rawValue : directory.rawValue + relative + "/"
                do throws(SettingsError) {
                    group = (path, .success(try SettingDirectory(path)))
                } catch {
                    group = (path, .failure(error))
                }
                continue
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw Problem(line: number, message: "expected 'name=value' or '[group]', found '\(LineText.excerpt(trimmed))'")
            }
            guard let group else {
                throw Problem(line: number, message: "'\(LineText.excerpt(trimmed))' comes before the first [group] line")
            }
            let name = LineText.trimmed(trimmed[..<equals])
            let key: Result<SettingPath, SettingsError>
            switch group.directory {
            case .success(let directory):
                do throws(SettingsError) { key = .success(try directory.key(named: name)) } catch { key = .failure(error) }
            case .failure(let error):
                key = .failure(error)
            }
            let path = group.path + name
            let entry = TextEntry(
                path: path, key: key, text: LineText.trimmed(trimmed[trimmed.index(after: equals)...]), line: number)
            if entries.updateValue(entry, forKey: path) == nil { order.append(path) }
        }
        return (order.map { entries[$0]! }, comments)
    }

    private static func read(
        _ text: String, under directory: SettingDirectory, stoppingAtFirstProblem: Bool,
        keepingComments commentPrefix: String? = nil
    ) -> (entries: [(key: SettingPath, value: DBusValue, line: Int)], problems: [Problem], comments: [Comment]) {
        var group: SettingDirectory?
        var groupIsBroken = false
        var order: [SettingPath] = []
        var values: [SettingPath: (value: DBusValue, line: Int)] = [:]
        var problems: [Problem] = []
        var comments: [Comment] = []
        for (index, rawLine) in LineText.lines(text).enumerated() {
            let number = index + 1
            if stoppingAtFirstProblem, !problems.isEmpty { break }
            let trimmed = LineText.trimmed(rawLine)
            if let commentPrefix, trimmed.hasPrefix(commentPrefix) {
                if let group {
                    comments.append(
                        Comment(group: group, line: number, text: LineText.trimmed(trimmed.dropFirst(commentPrefix.count))))
                } else if !groupIsBroken {
                    problems.append(Problem(line: number, message: "'\(LineText.excerpt(trimmed))' comes before the first [group] line"))
                }
                continue
            }
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") {
                continue
            }
            if trimmed.hasPrefix("[") {
                group = nil
                groupIsBroken = true
                guard trimmed.hasSuffix("]"), let close = trimmed.lastIndex(of: "]") else {
                    problems.append(Problem(line: number, message: "a group line is '[path]', not '\(LineText.excerpt(trimmed))'"))
                    continue
                }
                let name = trimmed[trimmed.index(after: trimmed.startIndex)..<close]
                let relative = name.split(separator: "/").joined(separator: "/")
                let text = relative.isEmpty ? directory.rawValue : directory.rawValue + relative + "/"
                do {
                    group = try SettingDirectory(text)
                    groupIsBroken = false
                } catch {
                    problems.append(Problem(line: number, message: "group [\(name)]: \(error.message)"))
                }
                continue
            }
            if groupIsBroken { continue }
            guard let equals = trimmed.firstIndex(of: "=") else {
                problems.append(Problem(line: number, message: "expected 'name=value' or '[group]', found '\(LineText.excerpt(trimmed))'"))
                continue
            }
            guard let group else {
                problems.append(Problem(line: number, message: "'\(LineText.excerpt(trimmed))' comes before the first [group] line"))
                continue
            }
            let name = LineText.trimmed(trimmed[..<equals])
            let valueText = String(trimmed[trimmed.index(after: equals)...])
            let key: SettingPath
            do {
                key = try group.key(named: name)
            } catch {
                problems.append(Problem(line: number, message: error.message))
                continue
            }
            do throws(GVariantTextError) {
                let value = try GVariantText.parse(valueText)
                if values.updateValue((value, number), forKey: key) == nil { order.append(key) }
            } catch {
                problems.append(Problem(line: number, message: "the value of \(key) is not GVariant text: \(error)"))
            }
        }
        let entries = order.map { key in
            let entry = values[key]!
            return (key: key, value: entry.value, line: entry.line)
        }
        return (entries, problems, comments)
    }
}
