// SPDX-License-Identifier: Apache-2.0

/// A GSettings schema source (`*.gschema.xml`, or `*.enums.xml` with only enumerations), as read from its XML:
/// its schemas, enumerations and flags, each with the line it is on. ``GSettingsSchemas`` turns the files of
/// the schema folders into the broker's schemas.
///
/// What is read (GLib's `gschema.dtd`): `<schemalist>` holding `<schema id path? extends? list-of?
/// gettext-domain?>`, `<enum id>` and `<flags id>` (each with `<value nick value>`); a schema holds `<key name
/// (type | enum | flags)>` (with `<default>`, `<summary>`, `<description>`, `<range min? max?>`, `<choices>` of
/// `<choice value>`, `<aliases>` of `<alias value target>`), `<child name schema>` and `<override name>`. An
/// element or attribute GLib does not know is a ``Problem`` that names its line, as is a missing attribute:
/// GLib's `glib-compile-schemas` refuses such a file too.
package struct GSettingsSchemaFile: Sendable {
    /// The schemas, in the order of the file.
    package var schemas: [Schema] = []
    /// The enumerations and flags, in the order of the file.
    package var enumerations: [Enumeration] = []

    /// An `<enum>` or `<flags>`.
    package struct Enumeration: Sendable, Hashable {
        package var id: String
        /// Whether it is `<flags>` (a key's value is a set of the nicks, type `as`) rather than `<enum>`.
        package var isFlags: Bool
        /// The nicks, in the order of the file.
        package var nicks: [String]
        package var line: Int
    }

    /// A `<schema>`.
    package struct Schema: Sendable {
        package var id: String
        /// The path its keys are at (it ends in `/`); nil for a relocatable schema.
        package var path: String?
        /// The schema whose keys and children it has too (`extends`).
        package var extends: String?
        package var keys: [Key] = []
        package var children: [Child] = []
        /// The defaults it gives keys of the schema it extends.
        package var overrides: [Override] = []
        package var line: Int
    }

    /// A `<key>`.
    package struct Key: Sendable {
        package var name: String
        package var kind: Kind
        /// The `<default>` text (GVariant text, as written: a translated default's `l10n` is not applied),
        /// with its line; nil when there is none.
        package var defaultText: (text: String, line: Int)?
        package var summary: String?
        package var description: String?
        /// The `<range>`'s bounds (GVariant text; nil for a bound not given), with its line.
        package var range: (min: String?, max: String?, line: Int)?
        /// The `<choice>` values, with the line of `<choices>`.
        package var choices: (values: [String], line: Int)?
        /// The `<alias>` values (GSettings reads each as its target).
        package var aliases: [String] = []
        package var line: Int
    }

    /// How a key's type is given.
    package enum Kind: Sendable, Hashable {
        /// `type="…"`, a GVariant type string.
        case type(String)
        /// `enum="id"`: a string among the enumeration's nicks.
        case enumeration(String)
        /// `flags="id"`: an array of strings, each among the flags' nicks.
        case flags(String)
    }

    /// A `<child name schema>`: the schema `schema` at the parent's path + `name` + `/`.
    package struct Child: Sendable, Hashable {
        package var name: String
        package var schema: String
        package var line: Int
    }

    /// An `<override name>`: a new default for a key of the extended schema.
    package struct Override: Sendable, Hashable {
        package var name: String
        package var text: String
        package var line: Int
    }

    /// What is wrong with a schema source, and on which line.
    package typealias Problem = XMLProblem

    /// Reads a schema source.
    ///
    /// - Throws: ``Problem`` naming the line: XML that is not well formed, or elements and attributes that are
    ///   not those of a GSettings schema.
    package init(parsing text: String) throws(Problem) {
        let root = try XMLReader.parse(text)
        guard root.name == "schemalist" else {
            throw Problem(line: root.line, "the root element is <\(root.name)>; a GSettings schema file's is <schemalist>")
        }
        try Self.check(root, allowing: ["gettext-domain"])
        for element in root.children {
            switch element.name {
            case "schema": schemas.append(try Self.schema(element))
            case "enum", "flags": enumerations.append(try Self.enumeration(element))
            default:
                throw Problem(line: element.line, "<\(element.name)> is not allowed in <schemalist>; expected <schema>, <enum> or <flags>")
            }
        }
    }

    // MARK: - Elements

    private static func schema(_ element: XMLElement) throws(Problem) -> Schema {
        try check(element, allowing: ["id", "path", "extends", "list-of", "gettext-domain"])
        var schema = Schema(
            id: try attribute("id", of: element), path: element.attributes["path"], extends: element.attributes["extends"],
            line: element.line)
        for child in element.children {
            switch child.name {
            case "key":
                schema.keys.append(try key(child))
            case "child":
                try check(child, allowing: ["name", "schema"])
                schema.children.append(
                    Child(name: try attribute("name", of: child), schema: try attribute("schema", of: child), line: child.line))
            case "override":
                try check(child, allowing: ["name", "l10n", "context"])
                schema.overrides.append(Override(name: try attribute("name", of: child), text: child.text, line: child.line))
            default:
                throw Problem(
                    line: child.line, "<\(child.name)> is not allowed in <schema>; expected <key>, <child> or <override>")
            }
        }
        return schema
    }

    private static func key(_ element: XMLElement) throws(Problem) -> Key {
        try check(element, allowing: ["name", "type", "enum", "flags"])
        let name = try attribute("name", of: element)
        let given: [Kind] = [
            element.attributes["type"].map(Kind.type), element.attributes["enum"].map(Kind.enumeration),
            element.attributes["flags"].map(Kind.flags),
        ].compactMap { $0 }
        guard given.count == 1 else {
            throw Problem(line: element.line, "<key name='\(name)'> needs exactly one of the attributes type, enum and flags")
        }
        var key = Key(name: name, kind: given[0], line: element.line)
        for child in element.children {
            switch child.name {
            case "default":
                try check(child, allowing: ["l10n", "context"])
                key.defaultText = (child.text, child.line)
            case "summary":
                try check(child, allowing: ["context"])
                key.summary = normalizedWhitespace(child.text)
            case "description":
                try check(child, allowing: ["context"])
                key.description = normalizedWhitespace(child.text)
            case "range":
                try check(child, allowing: ["min", "max"])
                key.range = (child.attributes["min"], child.attributes["max"], child.line)
            case "choices":
                try check(child, allowing: [])
                var values: [String] = []
                for choice in child.children {
                    guard choice.name == "choice" else {
                        throw Problem(line: choice.line, "<\(choice.name)> is not allowed in <choices>; expected <choice value='…'/>")
                    }
                    try check(choice, allowing: ["value"])
                    values.append(try attribute("value", of: choice))
                }
                key.choices = (values, child.line)
            case "aliases":
                try check(child, allowing: [])
                for alias in child.children {
                    guard alias.name == "alias" else {
                        throw Problem(line: alias.line, "<\(alias.name)> is not allowed in <aliases>; expected <alias value='…' target='…'/>")
                    }
                    try check(alias, allowing: ["value", "target"])
                    key.aliases.append(try attribute("value", of: alias))
                    _ = try attribute("target", of: alias)
                }
            default:
                throw Problem(
                    line: child.line,
                    "<\(child.name)> is not allowed in <key>; expected <default>, <summary>, <description>, <range>, "
                        + "<choices> or <aliases>")
            }
        }
        return key
    }

    private static func enumeration(_ element: XMLElement) throws(Problem) -> Enumeration {
        try check(element, allowing: ["id"])
        var result = Enumeration(id: try attribute("id", of: element), isFlags: element.name == "flags", nicks: [], line: element.line)
        for value in element.children {
            guard value.name == "value" else {
                throw Problem(line: value.line, "<\(value.name)> is not allowed in <\(element.name)>; expected <value nick='…' value='…'/>")
            }
            try check(value, allowing: ["nick", "value"])
            let nick = try attribute("nick", of: value)
            guard Int64(try attribute("value", of: value)) != nil else {
                throw Problem(line: value.line, "the value of nick '\(LineText.excerpt(nick))' is not an integer")
            }
            result.nicks.append(nick)
        }
        return result
    }

    /// Throws when the element has an attribute not in `allowed`, or holds text where only elements belong.
    private static func check(_ element: XMLElement, allowing allowed: Set<String>) throws(Problem) {
        for name in element.attributes.keys.sorted() where !allowed.contains(name) {
            throw Problem(line: element.line, "<\(element.name)> has no attribute '\(LineText.excerpt(name))'")
        }
        let holdsText = ["default", "summary", "description", "override"].contains(element.name)
        if !holdsText, element.content.contains(where: { if case .text(let text) = $0 { !text.allSatisfy(\.isWhitespace) } else { false } }) {
            throw Problem(line: element.line, "<\(element.name)> holds text; only elements belong in it")
        }
    }

    private static func attribute(_ name: String, of element: XMLElement) throws(Problem) -> String {
        guard let value = element.attributes[name] else {
            throw Problem(line: element.line, "<\(element.name)> has no '\(name)' attribute")
        }
        return value
    }

    /// A summary's or description's text as GLib shows it: paragraphs are separated by a blank line; each is
    /// trimmed and its runs of white space made one space, and they are joined by a blank line.
    package static func normalizedWhitespace(_ text: String) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\u{0C}" || $0 == "\u{0B}" }
        // Split at a newline, optional white space, and one or more newlines.
        var paragraphs: [String] = []
        var current = ""
        var index = text.startIndex
        while index < text.endIndex {
            if text[index] == "\n" {
                var look = text.index(after: index)
                while look < text.endIndex, isSpace(text[look]), text[look] != "\n" { look = text.index(after: look) }
                if look < text.endIndex, text[look] == "\n" {
                    // A blank line: the paragraph ends; more newlines right after belong to the separator.
                    while look < text.endIndex, text[look] == "\n" { look = text.index(after: look) }
                    paragraphs.append(current)
                    current = ""
                    index = look
                    continue
                }
            }
            current.append(text[index])
            index = text.index(after: index)
        }
        paragraphs.append(current)
        return paragraphs.map { paragraph in
            paragraph.split(whereSeparator: isSpace).joined(separator: " ")
        }.joined(separator: "\n\n")
    }
}
