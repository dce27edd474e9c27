// SPDX-License-Identifier: Apache-2.0

import Foundation

/// Writes to standard output and standard error without buffering, so that each change `watch` prints
/// reaches a pipe at once.
///
/// Text for people goes through ``lines(_:)`` (and errors through ``fail(_:_:)``), which make every character
/// a terminal would act on visible (``visible(_:)``): much of what is printed was chosen by other processes (a
/// schema's summary, a writer's process name, a value, a broker's message), and printed raw, an escape sequence
/// among it could hide or rewrite what the terminal shows. JSON (``json(_:)``) is written exact: its strings
/// carry those characters as `\u` escapes.
enum Output {
    /// Writes lines for people, each made visible (``visible(_:)``) and followed by a newline, in one write.
    static func lines(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        write(lines.map(visible).joined(separator: "\n") + "\n")
    }

    /// Writes a JSON value and a newline.
    static func json(_ value: JSONValue) {
        write(value.text + "\n")
    }

    /// Writes text to standard output as it is: for a file format (`dump`) or JSON, never for text that has
    /// not been made visible.
    static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Writes text to standard error.
    static func writeError(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// Prints `Error: <message>` to standard error, made visible, and exits with `status`.
    ///
    /// - Parameter lines: whether the message's newlines are its own (a message settingsctl made, such as the
    ///   list of keys a load refuses), so that each line is made visible alone; a message from elsewhere (a
    ///   broker's) is one line, its newlines shown as `\n`.
    static func fail(_ status: ExitStatus, _ message: String, lines: Bool = false) -> Never {
        let text = lines
            ? message.split(separator: "\n", omittingEmptySubsequences: false).map { visible(String($0)) }
                .joined(separator: "\n")
            : visible(message)
        writeError("Error: \(text)\n")
        exit(status.rawValue)
    }

    /// Whether a terminal acts on a character instead of showing it, or the character moves or reorders the
    /// text around it: the C0 controls, DEL, the C1 controls, the line and paragraph separators (U+2028,
    /// U+2029), and the bidirectional formatting characters (U+061C, U+200E, U+200F, U+202A–U+202E,
    /// U+2066–U+2069).
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00..<0x20, 0x7F..<0xA0, 0x061C, 0x200E, 0x200F, 0x2028...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// The text with every character of ``isHidden(_:)`` written as visible text: `\t`, `\n` and `\r`, other
    /// ASCII controls as `\x1b`, the others as `\u202e`. Every other character, the backslash included, is
    /// kept, so the text of a value (GVariant text, whose own escapes are made the same way) reads as before.
    ///
    /// ```swift
    /// Output.visible("app\u{1B}[8m")   // app\x1b[8m
    /// ```
    static func visible(_ text: String) -> String {
        // The common case, printable ASCII, is returned as it is.
        guard text.utf8.contains(where: { $0 < 0x20 || $0 >= 0x7F }), text.unicodeScalars.contains(where: isHidden)
        else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard isHidden(scalar) else {
                result.append(scalar)
                continue
            }
            switch scalar {
            case "\t": result.append(contentsOf: #"\t"#.unicodeScalars)
            case "\n": result.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": result.append(contentsOf: #"\r"#.unicodeScalars)
            default:
                result.append(contentsOf: escape(scalar).unicodeScalars)
            }
        }
        return String(result)
    }

    /// `\x1b` for an ASCII character, `\u202e` for another one of the Basic Multilingual Plane.
    static func escape(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16)
        return scalar.isASCII
            ? #"\x"# + String(repeating: "0", count: 2 - hex.count) + hex
            : #"\u"# + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
