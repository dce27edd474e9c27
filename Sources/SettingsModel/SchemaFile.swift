// SPDX-License-Identifier: Apache-2.0

import DBus

/// A schema file: what `settingsctl register` and `settingsctl check` read, and what apps install for the
/// broker under `settingsbus/schemas/`: a keyfile whose groups are directories and whose lines are
/// `key.field=value`.
///
/// ```
/// [/org/example/editor/]
/// tab-width.type=u
/// tab-width.default=4
/// tab-width.summary=Spaces per tab
/// tab-width.range=1,16
/// theme.type=s
/// theme.default='dark'
/// theme.choices=['light', 'dark']
/// ```
///
/// Fields: `type` (a D-Bus signature; when absent, the type of the default's text), `default` (GVariant
/// text read as `type`; required without `type`, and a key with a `type` and no `default` has no value until one
/// is set), `summary` and `description` (plain text, the rest of the line), `range`
/// (`min,max` or `(min, max)`, each of the key's type), `choices` (a GVariant array of the key's type),
/// `secret` and `machine-local` (`true` or `false`; a machine-local key's values never leave the machine when
/// the broker syncs). Blank lines and lines starting with `#` or `;` are skipped.
public struct SchemaFile: Sendable {
    /// The schemas, by key.
    public var schemas: [SettingPath: SettingSchema] = [:]

    /// What is wrong with a schema file, and on which line.
    public struct Problem: Error, Sendable, Hashable, CustomStringConvertible {
        /// The line, counted from 1.
        public var line: Int
        /// What is wrong, for people.
        public var message: String

        /// - Parameter message: kept to its first 400 characters (then `…`).
        public init(line: Int, message: String) {
            self.line = line
            self.message = LineText.excerpt(message, limit: FileBounds.maximumMessage)
        }

        /// `line N: message`.
        public var description: String { "line \(line): \(message)" }
    }

    /// The fields given for one key, with the line each came from.
    private struct Fields {
        var values: [String: (text: String, line: Int)] = [:]
        var firstLine: Int
    }

    /// The fields a key may have.
    public static let fieldNames = ["type", "default", "summary", "description", "range", "choices", "secret", "machine-local"]

    /// Reads a schema file, and checks each schema (``SettingSchema/validate(for:)``).
    ///
    /// - Throws: ``Problem``, naming the line and what is wrong.
    public init(parsing text: String) throws(Problem) {
        var group: SettingDirectory?
        var fields: [SettingPath: Fields] = [:]
        let lines = LineText.lines(text)
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            let line = LineText.trimmed(rawLine)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else {
                    throw Problem(line: number, message: "a group line is '[/directory/]', not '\(LineText.excerpt(line))'")
                }
                let name = line.dropFirst().dropLast().split(separator: "/").joined(separator: "/")
                do {
                    group = try SettingDirectory(name.isEmpty ? "/" : "/\(name)/")
                } catch {
                    throw Problem(line: number, message: "\(error.message)")
                }
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw Problem(line: number, message: "expected 'key.field=value' or '[/directory/]', found '\(LineText.excerpt(line))'")
            }
            guard let group else {
                throw Problem(line: number, message: "'\(LineText.excerpt(line))' comes before the first [/directory/] line")
            }
            let left = LineText.trimmed(line[..<equals])
            let value = LineText.trimmed(line[line.index(after: equals)...])
            guard let dot = left.lastIndex(of: ".") else {
                throw Problem(line: number, message: "'\(LineText.excerpt(left))' names no field: write key.type, key.default, key.summary, …")
            }
            let field = String(left[left.index(after: dot)...])
            guard Self.fieldNames.contains(field) else {
                let known = Self.fieldNames.joined(separator: ", ")
                throw Problem(line: number, message: "unknown field '\(LineText.excerpt(field))'; the fields are \(known)")
            }
            let key: SettingPath
            do {
                key = try group.key(named: String(left[..<dot]))
            } catch {
                throw Problem(line: number, message: "\(error.message)")
            }
            fields[key, default: Fields(firstLine: number)].values[field] = (value, number)
        }
        for (key, given) in fields.sorted(by: { $0.value.firstLine < $1.value.firstLine }) {
            let schema = try Self.schema(for: key, given)
            do throws(SettingsError) {
                try schema.validate(for: key)
            } catch {
                throw Problem(line: given.firstLine, message: error.message)
            }
            schemas[key] = schema
        }
    }

    private static func schema(for key: SettingPath, _ fields: Fields) throws(Problem) -> SettingSchema {
        func parse(_ field: String, as type: DBusType?) throws(Problem) -> DBusValue? {
            guard let (text, line) = fields.values[field] else { return nil }
            do {
                return try GVariantText.parse(text, as: type)
            } catch {
                throw Problem(line: line, message: "\(key).\(field): \(error)")
            }
        }
        var type: DBusType?
        if let (text, line) = fields.values["type"] {
            do {
                type = try DBusType(parsing: text)
            } catch {
                throw Problem(line: line, message: "\(key).type '\(LineText.excerpt(text))' is not one D-Bus type: \(error.message)")
            }
        }
        let defaultValue = try parse("default", as: type)
        guard let keyType = type ?? defaultValue?.type else {
            throw Problem(
                line: fields.firstLine,
                message: "\(key) has neither a type nor a default: add \(key.name).type=… (and, if it has one, "
                    + "\(key.name).default=…)")
        }
        var schema = SettingSchema(type: keyType, defaultValue: defaultValue)
        schema.summary = fields.values["summary"]?.text
        schema.description = fields.values["description"]?.text
        if let (text, line) = fields.values["range"] {
            let tuple = text.hasPrefix("(") ? text : "(\(text))"
            let parsed: DBusValue
            do {
                parsed = try GVariantText.parse(tuple, as: .structure([keyType, keyType]))
            } catch {
                throw Problem(line: line, message: "\(key).range takes min,max of type '\(keyType)': \(error)")
            }
            guard case .structure(let bounds) = parsed, bounds.count == 2 else {
                throw Problem(line: line, message: "\(key).range is not a pair")
            }
            schema.range = SettingRange(min: bounds[0], max: bounds[1])
        }
        if case .array(_, let choices)? = try parse("choices", as: .array(keyType)) {
            schema.choices = choices
        }
        if let (text, line) = fields.values["secret"] {
            guard text == "true" || text == "false" else {
                throw Problem(line: line, message: "\(key).secret is true or false, not '\(LineText.excerpt(text))'")
            }
            schema.isSecret = text == "true"
        }
        if let (text, line) = fields.values["machine-local"] {
            guard text == "true" || text == "false" else {
                throw Problem(line: line, message: "\(key).machine-local is true or false, not '\(LineText.excerpt(text))'")
            }
            schema.isMachineLocal = text == "true"
        }
        return schema
    }
}
