// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The JSON the editor sends to its page: written by hand, so that what reaches the page is exactly what is
/// built here (object keys sorted, strings escaped for JSON and for an HTML page: `<`, `>` and `&` as `\u`
/// escapes).
enum JSON: Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    /// An optional string: the string, or `null`.
    static func optional(_ text: String?) -> JSON { text.map { .string($0) } ?? .null }

    /// An unsigned integer (serials, counts), exact up to 2^53.
    static func integer(_ number: some BinaryInteger) -> JSON { .number(Double(number)) }

    /// The JSON text.
    var text: String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .null: output += "null"
        case .bool(let flag): output += flag ? "true" : "false"
        case .number(let number):
            if number.isFinite, number == number.rounded(), abs(number) < 9.007_199_254_740_992e15 {
                output += String(Int64(number))
            } else if number.isFinite {
                output += "\(number)"
            } else {
                output += "null"
            }
        case .string(let text): Self.quote(text, to: &output)
        case .array(let items):
            output += "["
            for (index, item) in items.enumerated() {
                if index > 0 { output += "," }
                item.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, name) in members.keys.sorted().enumerated() {
                if index > 0 { output += "," }
                Self.quote(name, to: &output)
                output += ":"
                members[name]!.write(to: &output)
            }
            output += "}"
        }
    }

    private static func quote(_ text: String, to output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "<", ">", "&", "\u{2028}", "\u{2029}":
                output += "\\u" + hex(scalar.value)
            case _ where scalar.value < 0x20:
                output += "\\u" + hex(scalar.value)
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// A value as the page shows and edits it.
enum ValueText {
    /// GVariant text with the annotations that read it back as its own type (`uint32 7`), as
    /// `settingsctl get` prints it.
    static func text(_ value: DBusValue) -> String {
        GVariantText.format(value)
    }

    /// GVariant text without annotations (`7`), what a number field or a list of choices shows; the editor
    /// reads it back as the key's registered type.
    static func plain(_ value: DBusValue) -> String {
        GVariantText.format(value, annotateTypes: false)
    }

    /// A value as JSON: `{"text", "plain"}`.
    /// `string` holds a string's own text, and `strings` the elements of an array of strings, for the page's
    /// text field and list editor.
    static func json(_ value: DBusValue?) -> JSON {
        guard let value else { return .null }
        var fields: [String: JSON] = ["text": .string(text(value)), "plain": .string(plain(value))]
        switch value {
        case .string(let string): fields["string"] = .string(string)
        case .array(.string, let elements):
            fields["strings"] = .array(elements.map { if case .string(let string) = $0 { .string(string) } else { .null } })
        default: break
        }
        return .object(fields)
    }
}

extension SettingsError {
    /// The broker's short error name (`OutOfRange`, `NotWritable`), as the page shows it.
    var shortName: String {
        let name = dbusError.name.rawValue
        return name.split(separator: ".").last.map(String.init) ?? name
    }
}
