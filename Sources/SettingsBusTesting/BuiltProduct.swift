// SPDX-License-Identifier: Apache-2.0

import Foundation

/// The executables of this package that `swift build` puts next to the test bundle: the broker, the CLI and
/// the examples.
public enum BuiltProduct {
    /// The path of an executable product, such as `follow-theme`.
    ///
    /// The test bundle is `.build/<config>/<Package>PackageTests.xctest`; `swift build` puts executables in
    /// `.build/<config>/`.
    ///
    /// - Throws: ``TestProcess/Failure`` when it is missing ("build it first: swift build").
    public static func path(_ name: String) throws -> String {
        var candidates: [String] = []
        for start in [CommandLine.arguments.first ?? "", "/proc/self/exe"] where !start.isEmpty {
            var folder = URL(fileURLWithPath: start).resolvingSymlinksInPath().deletingLastPathComponent()
            // Inside a bundle directory (`….xctest/…`), step out of it.
            while folder.path != "/", folder.path.contains(".xctest") {
                folder = folder.deletingLastPathComponent()
            }
            candidates.append(folder.appendingPathComponent(name).path)
        }
        if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            return found
        }
        throw TestProcess.Failure(
            description: "the \(name) executable is missing (looked at \(candidates.joined(separator: ", "))); "
                + "build it first: swift build")
    }
}
