// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// Every code block of the README and of the DocC catalogs is compiled or run by a test, and the manual pages
/// in docs/man say what the executables' own `--help` says.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct DocumentationBlockTests {
    /// The files that compile the Swift samples, each sample's lines in order.
    static let snippetFiles = [
        "Tests/SettingsBusTests/DocumentationSnippets.swift",
        "Tests/SettingsBusConfigurationTests/DocumentationSnippets.swift",
    ]

    /// The `(file, heading)` of every `DocumentationBlocks.block(in:under:)` call in the test sources.
    static func blocksAskedForByTests() throws -> Set<String> {
        let tests = Ctl.repository.appendingPathComponent("Tests")
        let pattern = try NSRegularExpression(
            pattern: #"DocumentationBlocks\.block\(\s*in: "([^"]+)",\s*under: "([^"]+)"\)"#)
        var asked: Set<String> = []
        let files = FileManager.default.enumerator(atPath: tests.path)?.compactMap { $0 as? String } ?? []
        for file in files where file.hasSuffix(".swift") && !file.hasSuffix("DocumentationBlocks.swift") {
            let text = try String(contentsOf: tests.appendingPathComponent(file), encoding: .utf8)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                guard let fileRange = Range(match.range(at: 1), in: text),
                    let headingRange = Range(match.range(at: 2), in: text)
                else { continue }
                asked.insert("\(text[fileRange])\n\(text[headingRange])")
            }
        }
        return asked
    }

    @Test func everyBlockIsCompiledOrRun() throws {
        let compiled = try Self.snippetFiles.map { file in
            try String(contentsOf: Ctl.repository.appendingPathComponent(file), encoding: .utf8)
                .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let asked = try Self.blocksAskedForByTests()
        var checked = 0
        for file in try DocumentationBlocks.checkedFiles() {
            for block in try DocumentationBlocks.blocks(in: file) {
                checked += 1
                switch block.language {
                case "swift" where DocumentationBlocks.isManifestFragment(block):
                    continue  // ManifestTests evaluates every one.
                case "swift":
                    #expect(
                        compiled.contains { DocumentationSamples.firstLineOutOfOrder(block.lines, in: $0) == nil },
                        "not compiled by \(Self.snippetFiles.joined(separator: " or ")): \(block)")
                case "text":
                    // A picture or a program's output: nothing to run.
                    #expect(!block.lines.contains { $0.hasPrefix("$ ") }, "a ```text block holds commands: \(block)")
                default:
                    #expect(
                        asked.contains("\(block.file)\n\(block.heading)"),
                        "no test runs it (DocumentationBlocks.block(in: \"\(block.file)\", under: \"\(block.heading)\")): \(block)")
                }
            }
        }
        #expect(checked >= 15)
        // Every block a test asks for is still there.
        for key in asked {
            let parts = key.split(separator: "\n", maxSplits: 1).map(String.init)
            #expect(
                try DocumentationBlocks.blocks(in: parts[0]).contains { $0.heading == parts[1] },
                "a test asks for a block under \"\(parts[1])\" in \(parts[0]), which has none")
        }
    }

    /// settings-broker(1) has every option of `settings-broker --help`, and settingsctl(1) every verb of
    /// `settingsctl --help`.
    @Test func theManualPagesNameEveryOptionAndVerb() async throws {
        let manuals = Ctl.repository.appendingPathComponent("docs/man")
        let brokerPage = try String(contentsOf: manuals.appendingPathComponent("settings-broker.1"), encoding: .utf8)
            .replacingOccurrences(of: "\\-", with: "-")
        let brokerHelp = try await TestProcess.run(try BuiltProduct.path("settings-broker"), ["--help"])
        let options = brokerHelp.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  --") else { return nil }
            return String(line.dropFirst(2).prefix { $0 != " " })
        }
        #expect(options.count >= 20, "\(brokerHelp.stdout)")
        for option in options {
            #expect(brokerPage.contains(option), "settings-broker.1 does not name \(option)")
        }
        let ctlPage = try String(contentsOf: manuals.appendingPathComponent("settingsctl.1"), encoding: .utf8)
            .replacingOccurrences(of: "\\-", with: "-")
        let ctlHelp = try await TestProcess.run(try Ctl.path(), ["--help"])
        let subcommands = try #require(ctlHelp.stdout.range(of: "SUBCOMMANDS:\n"))
        let verbs = ctlHelp.stdout[subcommands.upperBound...].split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  "), !line.hasPrefix("   "), line.dropFirst(2).first?.isLowercase == true else {
                return nil
            }
            return String(line.dropFirst(2).prefix { $0 != " " && $0 != "," })
        }
        #expect(verbs.count >= 17, "\(ctlHelp.stdout)")
        for verb in verbs {
            #expect(
                ctlPage.contains(".BR \(verb) ") || ctlPage.contains(".BI \(verb) ") || ctlPage.contains(".B \(verb)\n"),
                "settingsctl.1 has no entry for \(verb)")
        }
    }

    /// Each page renders with groff (man-db's formatter) without a warning.
    @Test(arguments: ["settingsctl.1", "settings-broker.1", "settingsbus.7"])
    func theManualPageRenders(_ page: String) async throws {
        let path = Ctl.repository.appendingPathComponent("docs/man/\(page)").path
        let result = try await TestProcess.run("/usr/bin/groff", ["-k", "-man", "-ww", "-z", "-Tutf8", path])
        #expect(result.status == 0 && result.stderr.isEmpty, "\(result.stderr)")
    }
}

/// Every Package.swift fragment of the README and the DocC catalogs is evaluated as an app's manifest that
/// depends on this package, by `swift package dump-package`, and names products and traits the package has.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ManifestTests {
    @Test func everyPackageFragmentIsAManifestOfThisPackagesProductsAndTraits() async throws {
        let fragments = try DocumentationBlocks.checkedFiles().flatMap { try DocumentationBlocks.blocks(in: $0) }
            .filter(DocumentationBlocks.isManifestFragment)
        #expect(fragments.count >= 3)
        let packageManifest = try String(
            contentsOf: Ctl.repository.appendingPathComponent("Package.swift"), encoding: .utf8)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-manifest-\(UUID())")
        defer { try? FileManager.default.removeItem(at: root) }
        // The fragments depend on "../SettingsBus": the app's folder sits beside a link to this checkout.
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("SettingsBus"), withDestinationURL: Ctl.repository)
        for (index, fragment) in fragments.enumerated() {
            let app = root.appendingPathComponent("MyApp\(index)")
            try FileManager.default.createDirectory(at: app, withIntermediateDirectories: true)
            let manifest = """
                // swift-tools-version: 6.2
                import PackageDescription

                let package = Package(
                    name: "MyApp",
                \(fragment.lines.joined(separator: "\n"))
                )

                """
            try manifest.write(to: app.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
            let dump = try await TestProcess.run(
                "/usr/bin/env", ["swift", "package", "--package-path", app.path, "dump-package"],
                timeLimit: .seconds(100))
            #expect(dump.status == 0, "\(fragment): \(dump.stderr)")
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any], "\(dump.stdout)")
            let text = String(describing: json)
            #expect(text.contains("SettingsBus"), "\(fragment): \(text)")
            // Each product and trait it names is one of the package's.
            for line in fragment.lines {
                for product in Self.quoted(after: ".product(name: ", in: line) {
                    #expect(packageManifest.contains(".library(name: \"\(product)\""), "no product \(product)")
                }
                if let traits = line.range(of: "traits: [") {
                    for trait in Self.quoted(after: "", in: String(line[traits.upperBound...].prefix { $0 != "]" })) {
                        #expect(packageManifest.contains("name: \"\(trait)\""), "no trait \(trait)")
                    }
                }
            }
        }
    }

    /// The string literals that follow `marker` in `line`.
    static func quoted(after marker: String, in line: String) -> [String] {
        var results: [String] = []
        var rest = Substring(line)
        while let start = marker.isEmpty ? rest.firstIndex(of: "\"").map({ $0..<$0 }) : rest.range(of: marker) {
            rest = rest[start.upperBound...]
            guard let open = rest.firstIndex(of: "\"") else { break }
            let afterOpen = rest[rest.index(after: open)...]
            guard let close = afterOpen.firstIndex(of: "\"") else { break }
            results.append(String(afterOpen[..<close]))
            rest = afterOpen[afterOpen.index(after: close)...]
        }
        return results
    }
}
