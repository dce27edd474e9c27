// SPDX-License-Identifier: Apache-2.0

/// What the line-based input formats (``SchemaFile``, ``Keyfile``, ``AdministratorLayer``'s files) share.
package enum LineText {
    /// The text without spaces, tabs and carriage returns at either end.
    package static func trimmed(_ text: some StringProtocol) -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) })
        else { return "" }
        return String(text[first...last])
    }

    /// The lines of a text, split at `\n` (a `\r` before it is white space to ``trimmed(_:)``).
    package static func lines(_ text: String) -> [Substring] {
        text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
    }
}
