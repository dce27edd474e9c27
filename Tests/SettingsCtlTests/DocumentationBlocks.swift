// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing

/// The fenced code blocks of the README and of the DocC catalogs, for the tests that compile or run them.
///
/// A test that runs a shell block asks for it with `DocumentationBlocks.block(in: "FILE", under: "HEADING")`,
/// written out with string literals: `DocumentationBlockTests` finds those calls in the test sources, and fails
/// for a block that no test asks for (and is neither Swift compiled by a snippets file, a Package.swift
/// fragment, nor a `text` picture).
enum DocumentationBlocks {
    /// One fenced block.
    struct Block: CustomStringConvertible {
        /// The file, relative to the repository.
        var file: String
        /// The nearest heading above the block, without its `#`s.
        var heading: String
        /// What follows the opening fence: `swift`, `sh`, `text`, or nothing.
        var language: String
        /// The block's lines, as written.
        var lines: [String]

        /// The lines that are commands: without comments after `#` and blank lines.
        var commands: [String] {
            lines.map { line in
                let text = line.range(of: " #").map { String(line[..<$0.lowerBound]) } ?? line
                return text.trimmingCharacters(in: .whitespaces)
            }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        }

        var description: String { "\(file), \"\(heading)\", a ```\(language) block starting \(lines.first ?? "")" }
    }

    /// The files whose blocks must be compiled or run: the README and the articles of both DocC catalogs.
    static func checkedFiles() throws -> [String] {
        var files = ["README.md"]
        for catalog in ["Sources/SettingsBus/Documentation.docc", "Sources/SettingsBusConfiguration/Documentation.docc"] {
            let folder = Ctl.repository.appendingPathComponent(catalog)
            for article in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            where article.hasSuffix(".md") {
                files.append("\(catalog)/\(article)")
            }
        }
        return files
    }

    /// Every fenced block of a file.
    static func blocks(in file: String) throws -> [Block] {
        let text = try String(contentsOf: Ctl.repository.appendingPathComponent(file), encoding: .utf8)
        var blocks: [Block] = []
        var heading = ""
        var current: Block?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if var block = current {
                if trimmed == "```" {
                    blocks.append(block)
                    current = nil
                } else {
                    block.lines.append(line)
                    current = block
                }
            } else if trimmed.hasPrefix("```") {
                current = Block(file: file, heading: heading, language: String(trimmed.dropFirst(3)), lines: [])
            } else if line.hasPrefix("#") {
                heading = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
            }
        }
        return blocks
    }

    /// The first block under a heading of a file.
    static func block(in file: String, under heading: String) throws -> Block {
        try #require(try blocks(in: file).first { $0.heading == heading }, "no block under \"\(heading)\" in \(file)")
    }

    /// Whether a block is a fragment of a Package.swift (`ManifestTests` evaluates it).
    static func isManifestFragment(_ block: Block) -> Bool {
        block.language == "swift"
            && block.lines.first?.trimmingCharacters(in: .whitespaces).hasPrefix("dependencies:") == true
    }
}
