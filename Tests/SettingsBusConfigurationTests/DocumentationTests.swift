// SPDX-License-Identifier: Apache-2.0

import Configuration
import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// The samples of the module's DocC catalog (Sources/SettingsBusConfiguration/Documentation.docc) and of the
/// documentation comments are compiled (DocumentationSnippets.swift), and run on a private bus with the real
/// broker. A Package.swift fragment (a block that starts with `dependencies:`) is evaluated as a manifest by
/// SettingsCtlTests' ManifestTests instead.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct DocumentationTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The Swift blocks of the catalog's articles and of the library's documentation comments, each line
    /// without its leading spaces (and `///`); Package.swift fragments left out.
    static func sampleBlocks() throws -> [[String]] {
        let sources = repository.appendingPathComponent("Sources/SettingsBusConfiguration")
        let catalog = sources.appendingPathComponent("Documentation.docc")
        var texts: [String] = []
        for article in try FileManager.default.contentsOfDirectory(atPath: catalog.path) where article.hasSuffix(".md") {
            texts.append(try String(contentsOf: catalog.appendingPathComponent(article), encoding: .utf8))
        }
        #expect(!texts.isEmpty, "no article in \(catalog.path)")
        for file in try FileManager.default.contentsOfDirectory(atPath: sources.path) where file.hasSuffix(".swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            texts.append(
                text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
                    .filter { $0.hasPrefix("///") }.map { $0.dropFirst(3) }.joined(separator: "\n"))
        }
        return texts.flatMap(DocumentationSamples.swiftBlocks).filter { $0.first?.hasPrefix("dependencies:") != true }
    }

    @Test func everySampleOfTheSectionIsCompiled() throws {
        let snippets = try String(
            contentsOf: Self.repository.appendingPathComponent(
                "Tests/SettingsBusConfigurationTests/DocumentationSnippets.swift"),
            encoding: .utf8)
        let compiled = snippets.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        let blocks = try Self.sampleBlocks()
        #expect(blocks.count >= 3)
        for block in blocks {
            // Each line of the block, in order, in the compiled file (the top-level lines sit in a function).
            if let line = DocumentationSamples.firstLineOutOfOrder(block, in: compiled) {
                Issue.record("a line of a sample is not compiled: \(line)")
            }
        }
    }

    @Test func theSampleReadsAndFollowsTheBus() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let settings = BusSettingsStore(bus: .address(bus.address))
            try await settings.set(SettingKey<Int32>("/org/example/editor/font-size", default: 12), to: 14)
            let config = try await editorConfiguration(settings: settings)
            #expect(config.int(forKey: "editor.font-size", default: 12) == 14)
            try await config.watchInt(forKey: "editor.font-size", default: 12) { sizes in
                var sizes = sizes.makeAsyncIterator()
                #expect(try await sizes.next() == 14)
                try await settings.reset(SettingKey<Int32>("/org/example/editor/font-size", default: 12))
                #expect(try await sizes.next() == 12)
            }
            await settings.close()
            #expect(await broker.stop() == 0)
        }
    }
}
