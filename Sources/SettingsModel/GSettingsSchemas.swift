// SPDX-License-Identifier: Apache-2.0

import DBus

/// The GSettings schema sources of the schema folders (``GSettingsSchemaFile``), turned into the broker's
/// schemas: each key of a schema with a path, at `path + name`, with its type, default, range, choices,
/// summary and description.
///
/// - A key's type: `type="…"` (a GVariant type string; a maybe type `mT` is an array `aT` of no element or
///   one, as the GIO module `settingsbus` stores it); `enum="id"`, a string among the enumeration's nicks;
///   `flags="id"`, an array of strings, each among the flags' nicks (choices of the element type). An `as` or
///   `ms` key's `<choices>` are what each element may be.
/// - `<default>` is GVariant text, used as written (a translated default is not translated).
/// - `extends` gives a schema the keys and children of another (its `<override>`s give new defaults);
///   `<child name schema>` places a relocatable schema at the parent's path + `name/` (a child schema with
///   a path of its own is at that path). An alias (`<aliases>`) is accepted as one more choice, stored as
///   written: GSettings reads it as its target, as it does from dconf.
/// - The vendor override files of a folder (`*.gschema.override`, keyfiles of `[schema-id]` groups and
///   `key=value` lines, read in name order, a later file winning) change the defaults of that folder's
///   schemas, as `glib-compile-schemas` applies them. Groups for one desktop (`[schema-id:GNOME]`) are not
///   applied: one broker serves every desktop's apps. An override for a schema or key that is not there is
///   skipped, as `glib-compile-schemas` does without `--strict`.
/// - Schemas and enumerations are found by id across the folders, the first folder's first; an id defined
///   twice in one folder is a problem at the second, which is skipped.
/// - A key that cannot be represented (a path the broker's key grammar refuses, a type D-Bus has no form for, a
///   default that is not of the type, a reference to an enumeration not defined) is skipped and reported as a
///   ``FileProblem`` with its file and line; the file's other keys are registered.
/// - A schema without a path that no child places (a relocatable schema) cannot be placed: its keys are
///   skipped and its id listed in ``relocatable``, not as a problem.
package struct GSettingsSchemas: Sendable {
    /// A schema source read from a folder.
    package struct Source: Sendable {
        package var file: String
        /// The folder's place in the search order, first first.
        package var folder: Int
        package var content: GSettingsSchemaFile

        package init(file: String, folder: Int, content: GSettingsSchemaFile) {
            self.file = file
            self.folder = folder
            self.content = content
        }
    }

    /// A vendor override file (`*.gschema.override`) read from a folder.
    package struct OverrideFile: Sendable {
        package var file: String
        package var folder: Int
        package var text: String

        package init(file: String, folder: Int, text: String) {
            self.file = file
            self.folder = folder
            self.text = text
        }
    }

    /// The schemas each file registers, in the order of the sources (a file that places no key is left out).
    /// A key placed by two files is the first's.
    package var files: [(file: String, schemas: [SettingPath: SettingSchema])] = []
    /// What could not be represented or read, by file and line.
    package var problems: [FileProblem] = []
    /// The ids of the schemas that have no path and that no child places.
    package var relocatable: [String] = []
    /// The keys whose GSettings type is a maybe type (`mT`), registered as arrays `aT`: dconf holds their
    /// values as maybes, which `settingsctl dump` writes back in that form.
    package var maybeKeys: Set<SettingPath> = []
    /// How many keys the files register in all.
    package var keyCount: Int { files.reduce(0) { $0 + $1.schemas.count } }

    private typealias Found<T> = (value: T, file: String, folder: Int)

    private var schemaByID: [String: Found<GSettingsSchemaFile.Schema>] = [:]
    private var enumerationByID: [String: Found<GSettingsSchemaFile.Enumeration>] = [:]
    /// Per folder and schema id, the vendor overrides by key name.
    private var vendorOverrides: [Int: [String: [String: (text: String, file: String, line: Int)]]] = [:]
    private var claimed: Set<SettingPath> = []
    private var placed: Set<String> = []

    /// Turns the sources into schemas.
    ///
    /// - Parameters:
    ///   - sources: the schema sources, in search order: folder by folder, each folder's files by name.
    ///   - overrides: the vendor override files, in the same order.
    package init(sources: [Source], overrides: [OverrideFile] = []) {
        for source in sources {
            for enumeration in source.content.enumerations {
                if let earlier = enumerationByID[enumeration.id] {
                    if earlier.folder == source.folder {
                        problem(source.file, enumeration.line, "'\(enumeration.id)' is defined already (\(earlier.file), line \(earlier.value.line)); this one is skipped")
                    }
                    continue
                }
                enumerationByID[enumeration.id] = (enumeration, source.file, source.folder)
            }
            for schema in source.content.schemas {
                if let earlier = schemaByID[schema.id] {
                    if earlier.folder == source.folder {
                        problem(source.file, schema.line, "schema '\(schema.id)' is defined already (\(earlier.file), line \(earlier.value.line)); this one is skipped")
                    }
                    continue
                }
                schemaByID[schema.id] = (schema, source.file, source.folder)
            }
        }
        for file in overrides { readOverrides(file) }
        for source in sources {
            var registered: [SettingPath: SettingSchema] = [:]
            for schema in source.content.schemas {
                guard let path = schema.path, schemaByID[schema.id]?.file == source.file else { continue }
                place(schema.id, at: path, line: schema.line, file: source.file, into: &registered, depth: 0)
            }
            if !registered.isEmpty { files.append((source.file, registered)) }
        }
        relocatable = schemaByID.values.filter { $0.value.path == nil && !placed.contains($0.value.id) }.map(\.value.id).sorted()
    }

    private mutating func problem(_ file: String, _ line: Int?, _ message: String) {
        problems.append(FileProblem(file: file, line: line, message: message))
    }

    // MARK: - Placing schemas

    /// Registers the keys of schema `id` (and of what it extends) at `path`, then places its children.
    private mutating func place(
        _ id: String, at path: String, line: Int, file: String, into registered: inout [SettingPath: SettingSchema],
        depth: Int
    ) {
        guard let found = schemaByID[id] else { return }
        guard depth < 16 else {
            problem(file, line, "schema '\(id)' is placed within itself, or children nest more than 16 levels; its keys at \(path) are skipped")
            return
        }
        placed.insert(id)
        let directory: SettingDirectory
        do {
            directory = try SettingDirectory(path)
        } catch {
            problem(found.file, found.value.line, "schema '\(id)' cannot be at \(path): \(error.message); its keys are skipped")
            return
        }
        let (keys, children) = members(of: found, depth: 0)
        for (key, defaultText, keyFile) in keys {
            let vendor = vendorOverrides[found.folder]?[id]?[key.name]
            do throws(FileProblem) {
                let settingPath: SettingPath
                do {
                    settingPath = try directory.key(named: key.name)
                } catch {
                    throw FileProblem(file: keyFile, line: key.line, message: "key '\(key.name)' of schema '\(id)': \(error.message); it is skipped")
                }
                guard !claimed.contains(settingPath) else { continue }
                var schema = try convert(key, defaultText: defaultText, of: id, file: keyFile)
                if let vendor {
                    do throws(FileProblem) {
                        schema.defaultValue = try defaultValue(vendor.text, key, schema.type, of: id, file: vendor.file, line: vendor.line)
                        try validate(schema, settingPath, key, file: vendor.file, line: vendor.line)
                    } catch {
                        problems.append(error)
                        schema = try convert(key, defaultText: defaultText, of: id, file: keyFile)
                    }
                }
                claimed.insert(settingPath)
                registered[settingPath] = schema
                if case .type(let text) = key.kind, text.hasPrefix("m") { maybeKeys.insert(settingPath) }
            } catch {
                problems.append(error)
            }
        }
        for child in children {
            guard let target = schemaByID[child.value.schema] else {
                problem(child.file, child.value.line, "<child name='\(child.value.name)'> names schema '\(child.value.schema)', which no schema file defines")
                continue
            }
            // A child with a path of its own is placed there, as a schema of its own.
            guard target.value.path == nil else { continue }
            place(child.value.schema, at: path + child.value.name + "/", line: child.value.line, file: child.file, into: &registered, depth: depth + 1)
        }
    }

    private typealias Member = (key: GSettingsSchemaFile.Key, defaultText: (text: String, line: Int)?, file: String)

    /// The keys (with their defaults, `<override>`s applied) and children of a schema and of what it extends.
    private mutating func members(
        of found: Found<GSettingsSchemaFile.Schema>, depth: Int
    ) -> (keys: [Member], children: [Found<GSettingsSchemaFile.Child>]) {
        var keys: [Member] = []
        var children: [Found<GSettingsSchemaFile.Child>] = []
        if let base = found.value.extends {
            if let extended = schemaByID[base], depth < 16 {
                (keys, children) = members(of: extended, depth: depth + 1)
            } else {
                problem(found.file, found.value.line, "schema '\(found.value.id)' extends '\(base)', which no schema file defines (or which extends itself); its own keys are registered")
            }
        }
        for override in found.value.overrides {
            guard let index = keys.firstIndex(where: { $0.key.name == override.name }) else {
                problem(found.file, override.line, "<override name='\(override.name)'> names no key of the schema '\(found.value.id)' extends; it is skipped")
                continue
            }
            keys[index].defaultText = (override.text, override.line)
            keys[index].file = found.file
        }
        for key in found.value.keys {
            keys.removeAll { $0.key.name == key.name }
            keys.append((key, key.defaultText, found.file))
        }
        children += found.value.children.map { ($0, found.file, found.folder) }
        return (keys, children)
    }

    // MARK: - Keys

    /// The broker's schema for a key.
    private func convert(
        _ key: GSettingsSchemaFile.Key, defaultText: (text: String, line: Int)?, of id: String, file: String
    ) throws(FileProblem) -> SettingSchema {
        func fail(_ line: Int, _ message: String) -> FileProblem {
            FileProblem(file: file, line: line, message: "key '\(key.name)' of schema '\(id)': \(message); it is skipped")
        }
        let type: DBusType
        var choices: [DBusValue]?
        switch key.kind {
        case .type(let text):
            let maybe = text.hasPrefix("m")
            do {
                let inner = try DBusType(parsing: String(maybe ? text.dropFirst() : Substring(text)))
                type = maybe ? .array(inner) : inner
            } catch {
                throw fail(key.line, "type '\(LineText.excerpt(text))' has no D-Bus form (a maybe type only at the top): \(error.message)")
            }
            if let given = key.choices {
                // A string key's choices, or what each element of an `as` (or a maybe `ms`) may be.
                guard type == .string || type == .array(.string) else {
                    throw fail(given.line, "<choices> is for string types, not '\(text)'")
                }
                choices = given.values.map(DBusValue.string)
            }
        case .enumeration(let name):
            guard let found = enumerationByID[name]?.value, !found.isFlags else {
                throw fail(key.line, "enum '\(name)' is not defined by an <enum> in a schema file")
            }
            type = .string
            choices = found.nicks.map(DBusValue.string)
        case .flags(let name):
            guard let found = enumerationByID[name]?.value, found.isFlags else {
                throw fail(key.line, "flags '\(name)' is not defined by a <flags> in a schema file")
            }
            type = .array(.string)
            choices = found.nicks.map(DBusValue.string)
        }
        // GSettings reads an alias as its target: a script may write it, as to dconf.
        if var accepted = choices {
            for alias in key.aliases where !accepted.contains(.string(alias)) { accepted.append(.string(alias)) }
            choices = accepted
        }
        guard let defaultText else { throw fail(key.line, "it has no <default>") }
        var schema = SettingSchema(
            type: type, defaultValue: try defaultValue(defaultText.text, key, type, of: id, file: file, line: defaultText.line),
            summary: key.summary, description: key.description, choices: choices)
        if let range = key.range {
            guard case .type = key.kind, let min = range.min, let max = range.max else {
                throw fail(range.line, "<range> needs min and max, on a key with a numeric type")
            }
            do {
                schema.range = SettingRange(min: try GVariantText.parse(min, as: type), max: try GVariantText.parse(max, as: type))
            } catch {
                throw fail(range.line, "<range> bounds are not of type '\(type)': \(error)")
            }
        }
        if case .flags(let name) = key.kind, case .array(_, let elements)? = schema.defaultValue,
            let nicks = enumerationByID[name]?.value.nicks
        {
            for case .string(let element) in elements where !nicks.contains(element) {
                throw fail(defaultText.line, "the default holds '\(element)', which is not a nick of flags '\(name)'")
            }
        }
        do throws(SettingsError) {
            try schema.validate()
        } catch {
            throw fail(key.line, error.message)
        }
        return schema
    }

    /// A default's value: GVariant text of the key's type; for a maybe type, `nothing`, `just v` or `v`, stored
    /// as an array of no element or one.
    private func defaultValue(
        _ text: String, _ key: GSettingsSchemaFile.Key, _ type: DBusType, of id: String, file: String, line: Int
    ) throws(FileProblem) -> DBusValue {
        let trimmed = String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        do {
            if case .type(let given) = key.kind, given.hasPrefix("m"), case .array(let inner) = type {
                if trimmed == "nothing" { return .array(inner, []) }
                let just = trimmed.hasPrefix("just ") ? String(trimmed.dropFirst(5)) : trimmed
                return .array(inner, [try GVariantText.parse(just, as: inner)])
            }
            return try GVariantText.parse(trimmed, as: type)
        } catch {
            throw FileProblem(
                file: file, line: line,
                message: "key '\(key.name)' of schema '\(id)': the default '\(LineText.excerpt(trimmed))' is not of type '\(type)': \(error); it is skipped")
        }
    }

    private func validate(
        _ schema: SettingSchema, _ path: SettingPath, _ key: GSettingsSchemaFile.Key, file: String, line: Int
    ) throws(FileProblem) {
        do throws(SettingsError) {
            try schema.validate()
        } catch {
            throw FileProblem(file: file, line: line, message: "the override of \(path): \(error.message); the schema's default stays")
        }
    }

    // MARK: - Vendor overrides

    /// Reads a `*.gschema.override` file into ``vendorOverrides``.
    private mutating func readOverrides(_ override: OverrideFile) {
        var group: String?
        for (index, raw) in LineText.lines(override.text).enumerated() {
            let line = LineText.trimmed(raw)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else {
                    problem(override.file, index + 1, "a group line is '[schema-id]', not '\(LineText.excerpt(line))'; the rest of the file is skipped")
                    return
                }
                let name = String(line.dropFirst().dropLast())
                // A group for one desktop (`[id:GNOME]`) is not applied.
                group = name.contains(":") ? nil : name
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                problem(override.file, index + 1, "expected 'key=value' or '[schema-id]', found '\(LineText.excerpt(line))'; the rest of the file is skipped")
                return
            }
            guard let group else { continue }
            let name = LineText.trimmed(line[..<equals])
            let value = LineText.trimmed(line[line.index(after: equals)...])
            vendorOverrides[override.folder, default: [:]][group, default: [:]][name] = (value, override.file, index + 1)
        }
    }
}
