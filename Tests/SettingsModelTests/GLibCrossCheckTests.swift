// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing

/// Checks the printer and parser against GLib itself, through PyGObject (Debian package `python3-gi`).
///
/// Each value is printed here, then parsed by `GLib.Variant.parse` and printed again by GLib with and without
/// annotations: GLib must read the type we meant, and print exactly what we printed.
struct GLibCrossCheckTests {
    static let python = "/usr/bin/python3"

    static let script = """
        import json, sys
        try:
            from gi.repository import GLib
        except ImportError as error:
            print(json.dumps({"missing": str(error)}))
            sys.exit(0)
        results = []
        for text in json.load(sys.stdin):
            try:
                value = GLib.Variant.parse(None, text, None, None)
                results.append([value.get_type_string(), value.print_(True), value.print_(False)])
            except Exception as error:
                results.append(["error", str(error), ""])
        print(json.dumps(results))
        """

    struct GLibResult {
        var type: String
        var annotated: String
        var unannotated: String
    }

    /// Runs GLib over the texts and returns, for each, its type and GLib's two printings.
    ///
    /// python3 runs through the test kit (`TestProcess`): it gets only its own pipes, and it is killed, and
    /// the test fails, if it runs past a minute, so a child that never sees the end of its input cannot hang
    /// the run.
    static func glib(_ texts: [String]) async throws -> [GLibResult] {
        let payload = String(decoding: try JSONSerialization.data(withJSONObject: texts), as: UTF8.self)
        let result = try await TestProcess.run(python, ["-c", script], input: payload, timeLimit: .seconds(60))
        guard result.status == 0 else {
            Issue.record("\(python) failed (\(result.status)): \(result.stderr); install the Debian packages python3 and python3-gi")
            return []
        }
        let data = Data(result.stdout.utf8)
        let decoded = try JSONSerialization.jsonObject(with: data)
        if let missing = (decoded as? [String: String])?["missing"] {
            Issue.record("GLib's Python bindings are missing (\(missing)); install the Debian package python3-gi")
            return []
        }
        guard let rows = decoded as? [[String]], rows.count == texts.count else {
            Issue.record("unexpected output from GLib: \(result.stdout)")
            return []
        }
        return rows.map { GLibResult(type: $0[0], annotated: $0[1], unannotated: $0[2]) }
    }

    /// Whether the value holds a subnormal double, which GLib prints but refuses to parse.
    static func containsSubnormal(_ value: DBusValue) -> Bool {
        switch value {
        case .double(let number): return number.isSubnormal
        case .variant(let inner): return containsSubnormal(inner)
        case .array(_, let elements): return elements.contains(where: containsSubnormal)
        case .structure(let fields): return fields.contains(where: containsSubnormal)
        case .dictionary(_, _, let entries):
            return entries.contains { containsSubnormal($0.key) || containsSubnormal($0.value) }
        default: return false
        }
    }

    static func check(_ values: [DBusValue]) async throws {
        let texts = values.map { GVariantText.format($0) }
        let results = try await glib(texts)
        for (index, result) in results.enumerated() {
            let value = values[index]
            #expect(result.type == value.type.signatureText, "GLib read \(texts[index]) as \(result.type)")
            #expect(result.annotated == texts[index], "GLib printed \(texts[index]) as \(result.annotated)")
            #expect(
                result.unannotated == GVariantText.format(value, annotateTypes: false),
                "GLib printed \(texts[index]) without annotations as \(result.unannotated)")
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func glibReadsAndPrintsOurTableAsWeDo() async throws {
        let values = GVariantFormatTests.annotated.map(\.0).filter { !Self.containsSubnormal($0) }
        #expect(values.count >= 40)
        try await Self.check(values)
    }

    @Test(.timeLimit(.minutes(1)))
    func glibReadsAndPrintsGeneratedValuesAsWeDo() async throws {
        var generator = DBusValueGenerator(seed: 2024)
        var values: [DBusValue] = []
        while values.count < 500 {
            let value = generator.value()
            if !Self.containsSubnormal(value) { values.append(value) }
        }
        try await Self.check(values)
    }

    @Test(.timeLimit(.minutes(1)))
    func weReadWhatGLibPrints() async throws {
        let texts = GVariantParseTests.inferred.map(\.0).filter { !$0.contains("5e-324") }
        let results = try await Self.glib(texts)
        // Texts we accept on purpose although GLib does not (see GVariantText's documentation).
        let extensions: Set<String> = ["{'a': 1, 'b': 1.5}"]
        for (text, result) in zip(texts, results) {
            let ours = try GVariantText.parse(text)
            if result.type == "error" {
                #expect(extensions.contains(text), "GLib refuses \(text): \(result.annotated)")
                continue
            }
            #expect(ours.type.signatureText == result.type, "\(text)")
            #expect(GVariantText.format(ours) == result.annotated, "\(text)")
        }
    }
}
