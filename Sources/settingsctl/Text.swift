// SPDX-License-Identifier: Apache-2.0

/// Small text helpers for the line-based input formats.
enum Text {
    /// The text without spaces, tabs and carriage returns at either end.
    static func trimmed(_ text: some StringProtocol) -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) })
        else { return "" }
        return String(text[first...last])
    }
}
