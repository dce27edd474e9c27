// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import TestMachine

/// The names `import SettingsBus` brings into an app's code: the client library's public top-level
/// declarations and what it re-exports. A new one fails this test until it is added to the list on purpose:
/// an app's namespace holds the names apps use, at most fifteen, and everything else is `package`, nested, or
/// in a module an app does not import (SettingsModel, DBus).
@Suite(.sharingTheMachine) struct AppNamespaceTests {
    /// Every name an app sees, on purpose.
    static let names: Set<String> = [
        "BusSettingsStore", "InMemorySettingsStore", "SettingsStore", "SettingKey", "SettingValue",
        "SettingRepresentation", "SettingRepresentations", "SettingChange", "SettingsUpdates", "ObservedSetting",
        "SettingsTransaction", "ConnectionStatus", "SettingDescription", "SettingPath", "SettingsError",
    ]

    /// The public names declared at the top level of SettingsBus's sources, and the names it re-exports.
    static func appNamespace() throws -> Set<String> {
        let folder = DocumentationTests.repository.appendingPathComponent("Sources/SettingsBus")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }
        #expect(!files.isEmpty)
        var found: Set<String> = []
        // A declaration at the top level starts its line; members and nested types are indented.
        let declaration = #/^(?:@\w+(?:\([^)]*\))?\s+)*public\s+(?:final\s+)?(?:class|struct|enum|protocol|actor|typealias|func|let|var)\s+(\w+)/#
        let reexport = #/^@_exported\s+public\s+import\s+(?:(?:struct|class|enum|protocol|typealias|func|let|var)\s+)?([\w.]+)/#
        for file in files {
            let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                if let match = line.firstMatch(of: declaration) {
                    found.insert(String(match.1))
                } else if let match = line.firstMatch(of: reexport) {
                    // A whole module re-exported brings all of its names: it is listed by its module name, and
                    // fails the test.
                    found.insert(String(match.1.split(separator: ".").last!))
                }
            }
        }
        return found
    }

    @Test func anAppSeesOnlyTheNamesListedAndAtMostFifteen() throws {
        let namespace = try Self.appNamespace()
        #expect(Self.names.count <= 15)
        let unlisted = namespace.subtracting(Self.names).sorted()
        #expect(
            unlisted.isEmpty,
            "public names that an app would see but that are not listed (make them package, nest them, or list them on purpose): \(unlisted)"
        )
        let gone = Self.names.subtracting(namespace).sorted()
        #expect(gone.isEmpty, "listed names that SettingsBus no longer declares: \(gone)")
    }
}
