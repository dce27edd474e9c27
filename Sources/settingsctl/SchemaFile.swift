// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The schema file `settingsctl register` reads: a keyfile whose groups are directories and whose lines are
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
/// Fields: `type` (a D-Bus signature; when absent, the type of the default's text), `default` (required,
/// GVariant text read as `type`), `summary` and `description` (plain text, the rest of the line), `range`
/// (`min,max` or `(min, max)`, each of the key's type), `choices` (a GVariant array of the key's type),
/// `secret` (`true` or `false`). Blank lines and lines starting with `#` or `;` are skipped.
struct SchemaFile {
    /// The schemas, by key.
    var schemas: [SettingPath: SettingSchema] = [:]

    /// The fields given for one key, with the line each came from.
    private struct Fields {
        var values: [String: (text: String, line: Int)] = [:]
        var firstLine: Int
    }

    static let fieldNames = ["type", "default", "summary", "description", "range", "choices", "secret"]

    /// Reads a schema file.
    ///
    /// - Throws: ``CtlError`` with status ``ExitStatus/invalid``, naming the line and what is wrong.
    init(parsing text: String) throws(CtlError) {
        var group: SettingDirectory?
        var fields: [SettingPath: Fields] = [:]
        let lines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            let line = Text.trimmed(rawLine)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else {
                    throw CtlError(.invalid, "line \(number): a group line is '[/directory/]', not '\(line)'")
                }
                let name = line.dropFirst().dropLast().split(separator: "/").joined(separator: "/")
                do {
                    group = try SettingDirectory(name.isEmpty ? "/" : "/\(name)/")
                } catch {
                    throw CtlError(.invalid, "line \(number): \(error.message)")
                }
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw CtlError(
                    .invalid, "line \(number): expected 'key.field=value' or '[/directory/]', found '\(line)'")
            }
            guard let group else {
                throw CtlError(.invalid, "line \(number): '\(line)' comes before the first [/directory/] line")
            }
            let left = Text.trimmed(line[..<equals])
            let value = Text.trimmed(line[line.index(after: equals)...])
            guard let dot = left.lastIndex(of: ".") else {
                throw CtlError(
                    .invalid, "line \(number): '\(left)' names no field: write key.type, key.default, key.summary, …")
            }
            let field = String(left[left.index(after: dot)...])
            guard Self.fieldNames.contains(field) else {
                let known = Self.fieldNames.joined(separator: ", ")
                throw CtlError(.invalid, "line \(number): unknown field '\(field)'; the fields are \(known)")
            }
            let key: SettingPath
            do {
                key = try group.key(named: String(left[..<dot]))
            } catch {
                throw CtlError(.invalid, "line \(number): \(error.message)")
            }
            fields[key, default: Fields(firstLine: number)].values[field] = (value, number)
        }
        for (key, given) in fields {
            schemas[key] = try Self.schema(for: key, given)
        }
    }

    private static func schema(for key: SettingPath, _ fields: Fields) throws(CtlError) -> SettingSchema {
        func parse(_ field: String, as type: DBusType?) throws(CtlError) -> DBusValue? {
            guard let (text, line) = fields.values[field] else { return nil }
            do {
                return try GVariantText.parse(text, as: type)
            } catch {
                throw CtlError(.invalid, "line \(line): \(key).\(field): \(error)")
            }
        }
        var type: DBusType?
        if let (text, line) = fields.values["type"] {
            do {
                type = try DBusType(parsing: text)
            } catch {
                throw CtlError(.invalid, "line \(line): \(key).type '\(text)' is not one D-Bus type: \(error.message)")
            }
        }
        guard let defaultValue = try parse("default", as: type) else {
            throw CtlError(.invalid, "line \(fields.firstLine): \(key) has no default: add \(key.name).default=…")
        }
        let keyType = type ?? defaultValue.type
        var schema = SettingSchema(type: keyType, defaultValue: defaultValue)
        schema.summary = fields.values["summary"]?.text
        schema.description = fields.values["description"]?.text
        if let (text, line) = fields.values["range"] {
            let tuple = text.hasPrefix("(") ? text : "(\(text))"
            let parsed: DBusValue
            do {
                parsed = try GVariantText.parse(tuple, as: .structure([keyType, keyType]))
            } catch {
                throw CtlError(.invalid, "line \(line): \(key).range takes min,max of type '\(keyType)': \(error)")
            }
            guard case .structure(let bounds) = parsed, bounds.count == 2 else {
                throw CtlError(.invalid, "line \(line): \(key).range is not a pair")
            }
            schema.range = SettingRange(min: bounds[0], max: bounds[1])
        }
        if case .array(_, let choices)? = try parse("choices", as: .array(keyType)) {
            schema.choices = choices
        }
        if let (text, line) = fields.values["secret"] {
            guard text == "true" || text == "false" else {
                throw CtlError(.invalid, "line \(line): \(key).secret is true or false, not '\(text)'")
            }
            schema.isSecret = text == "true"
        }
        return schema
    }
}
