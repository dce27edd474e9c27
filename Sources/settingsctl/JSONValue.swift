// SPDX-License-Identifier: Apache-2.0

/// A JSON value, written on one line with object members in the order given.
///
/// `settingsctl` writes JSON itself rather than through `JSONSerialization`, so that 64-bit integers keep
/// every digit and members keep a stable order.
indirect enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// The value as compact JSON text.
    var text: String {
        var output = ""
        write(to: &output)
        return output
    }

    private func write(to output: inout String) {
        switch self {
        case .null: output += "null"
        case .bool(let flag): output += flag ? "true" : "false"
        case .int(let number): output += String(number)
        case .uint(let number): output += String(number)
        case .double(let number):
            if number.isNaN {
                output += "\"nan\""
            } else if number.isInfinite {
                output += number < 0 ? "\"-inf\"" : "\"inf\""
            } else {
                output += "\(number)"
            }
        case .string(let text): Self.quote(text, into: &output)
        case .array(let elements):
            output += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                element.write(to: &output)
            }
            output += "]"
        case .object(let members):
            output += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { output += "," }
                Self.quote(member.0, into: &output)
                output += ":"
                member.1.write(to: &output)
            }
            output += "}"
        }
    }

    private static func quote(_ text: String, into output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            // Every character a terminal acts on is escaped, as JSON allows, so the text stays exact and shows
            // as it is on a terminal.
            case _ where Output.isHidden(scalar):
                let hex = String(scalar.value, radix: 16)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}
