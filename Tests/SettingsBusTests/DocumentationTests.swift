// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBus
import Testing

/// The documentation's code compiles and runs: every ```swift block of the SettingsBus articles is in
/// DocumentationSnippets.swift, which the test target compiles, and the samples run on a store.
struct DocumentationTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let catalog = repository.appendingPathComponent("Sources/SettingsBus/Documentation.docc")

    /// The Swift blocks of a Markdown text, each line without its leading spaces.
    static func swiftBlocks(_ markdown: String) -> [[String]] {
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

    @Test func everySampleOfTheArticlesIsCompiled() throws {
        let snippets = try String(
            contentsOf: Self.repository.appendingPathComponent("Tests/SettingsBusTests/DocumentationSnippets.swift"),
            encoding: .utf8)
        let compiled = snippets.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "\n")
        let articles = try FileManager.default.contentsOfDirectory(atPath: Self.catalog.path).filter { $0.hasSuffix(".md") }
        var checked = 0
        for article in articles {
            let text = try String(contentsOf: Self.catalog.appendingPathComponent(article), encoding: .utf8)
            for block in Self.swiftBlocks(text) {
                checked += 1
                #expect(compiled.contains(block.joined(separator: "\n")), "a sample of \(article) is not compiled:\n\(block.joined(separator: "\n"))")
            }
        }
        #expect(checked >= 8)
    }

    @Test func theSamplesRunOnAnInMemoryStore() async throws {
        let settings = InMemorySettingsStore()
        try await start(settings: settings)
        #expect(try await settings.get(.colorScheme) == .dark)
        #expect(try await settings.get(.fontSize) == 12)
        try await applyDefaults(settings: settings)
        #expect(try await settings.get(.tabWidth) == 8)
        #expect(try await settings.get(.editorFont).family == "Mono")
        try await settings.register(.tabWidth)
        await #expect(throws: SettingsError.self) { try await settings.set(.tabWidth, to: 99) }
    }

    /// App code throws its own errors from a transaction or an update, and nothing is written.
    @Test func aTransactionOrUpdateMayThrowTheAppsOwnError() async throws {
        struct Refused: Error {}
        let settings = InMemorySettingsStore()
        await #expect(throws: Refused.self) {
            try await settings.transaction { transaction in
                try transaction.set(.fontSize, to: 20)
                throw Refused()
            }
        }
        await #expect(throws: Refused.self) {
            try await settings.update(.fontSize) { size in
                size = 30
                throw Refused()
            }
        }
        #expect(try await settings.get(.fontSize) == 11)
    }
}
