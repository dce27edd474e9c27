// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBus
import SettingsBusTesting
import Testing

/// The documentation's code compiles and runs: every ```swift block of the SettingsBus articles, and the
/// README's client sample, is in DocumentationSnippets.swift, which the test target compiles, and the samples
/// run on a store. A Package.swift fragment (a block that starts with `dependencies:`) is evaluated as a
/// manifest by SettingsCtlTests' ManifestTests instead.
struct DocumentationTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let catalog = repository.appendingPathComponent("Sources/SettingsBus/Documentation.docc")

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
            for block in DocumentationSamples.swiftBlocks(text) where block.first?.hasPrefix("dependencies:") != true {
                checked += 1
                #expect(compiled.contains(block.joined(separator: "\n")), "a sample of \(article) is not compiled:\n\(block.joined(separator: "\n"))")
            }
        }
        #expect(checked >= 10)
    }

    /// The README's client sample: each of its lines, in order, in the compiled file (its statements sit in a
    /// function there).
    @Test func theReadmesClientSampleIsCompiled() throws {
        let snippets = try String(
            contentsOf: Self.repository.appendingPathComponent("Tests/SettingsBusTests/DocumentationSnippets.swift"),
            encoding: .utf8)
        let compiled = snippets.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        let sample = try #require(
            DocumentationSamples.swiftBlocks(readme).first { $0.first == "import SettingsBus" }, "the README's client sample")
        if let line = DocumentationSamples.firstLineOutOfOrder(sample, in: compiled) {
            Issue.record("a line of the README's sample is not compiled: \(line)")
        }
    }

    /// The sample of "Evolving your settings" moves a renamed key's value once and retires the old key.
    @Test func theRenamedKeysValueMovesOnce() async throws {
        let settings = InMemorySettingsStore()
        try await settings.register(.fontPoints)
        try await settings.set(.fontPoints, to: 14)
        try await upgradeToVersion2(settings: settings)
        #expect(try await settings.get(.textSize) == 14)
        await #expect(throws: SettingsError.self) { try await settings.describe(.fontPoints) }
        // A newer version's wider range is kept: the older version's narrower one is a conflict it catches.
        let wider = SettingKey<Int>("/org/example/app/tab-width", default: 4).range(1...32)
        try await settings.register(wider)
        try await registerBesideANewerVersion(settings: settings)
        #expect(try await settings.describe(.tabWidth).schema?.range != nil)
        try await settings.set(wider, to: 30)
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
