// SPDX-License-Identifier: Apache-2.0

import Foundation

/// What the tests that compile the documentation's samples share: the Swift blocks of a Markdown text, and
/// whether a block's lines stand, in order, in a compiled file.
public enum DocumentationSamples {
    /// The ```` ```swift ```` blocks of a Markdown text, each line without its leading and trailing spaces, blank
    /// lines left out.
    public static func swiftBlocks(_ markdown: String) -> [[String]] {
        var blocks: [[String]] = []
        var current: [String]?
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if current == nil, trimmed == "```swift" {
                current = []
            } else if current != nil, trimmed == "```" {
                blocks.append(current!)
                current = nil
            } else if current != nil, !trimmed.isEmpty {
                current!.append(trimmed)
            }
        }
        return blocks
    }

    /// The first line of `block` (without its leading and trailing spaces; blank ones left out) that is not in
    /// `compiled` after the lines before it; nil when every line is there, in order.
    public static func firstLineOutOfOrder(_ block: [String], in compiled: [String]) -> String? {
        var remaining = compiled[...]
        for line in block.map({ $0.trimmingCharacters(in: .whitespaces) }) where !line.isEmpty {
            guard let found = remaining.firstIndex(of: line) else { return line }
            remaining = remaining[(found + 1)...]
        }
        return nil
    }
}
