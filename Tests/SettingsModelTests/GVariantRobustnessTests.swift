// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

struct GVariantRobustnessTests {
    @Test(arguments: [
        String(repeating: "[", count: 10_000),
        String(repeating: "<", count: 10_000),
        String(repeating: "(", count: 10_000),
        String(repeating: "{", count: 10_000),
        String(repeating: "[1, ", count: 10_000),
        String(repeating: "{1: ", count: 10_000),
        "@" + String(repeating: "a", count: 10_000) + "s []",
        "@" + String(repeating: "(", count: 10_000),
        "int64 " + String(repeating: "@x ", count: 10_000) + "5",
        "'" + String(repeating: "\\", count: 10_001),
        "'" + String(repeating: "a", count: 100_000),
        String(repeating: "9", count: 10_000),
        "1e" + String(repeating: "9", count: 10_000),
        "0x" + String(repeating: "f", count: 10_000),
        "b'" + String(repeating: "\\7", count: 10_000),
        String(repeating: "nothing ", count: 1_000),
    ])
    func maliciousInputThrowsWithoutCrashing(_ text: String) {
        #expect(throws: GVariantTextError.self) { try GVariantText.parse(text) }
    }

    @Test func longFlatInputParsesInLinearTime() throws {
        let count = 100_000
        let text = "[" + (0..<count).map(String.init).joined(separator: ", ") + "]"
        guard case .array(.int32, let elements) = try GVariantText.parse(text) else {
            Issue.record("not an array of int32")
            return
        }
        #expect(elements.count == count)
    }

    @Test func randomTextNeverCrashesTheParser() {
        var random = SeededGenerator(seed: 42)
        let alphabet = Array("[](){}<>,:@'\"\\ bnjtfx0189.-+eEaysvuio{}%\u{0}é😀")
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...24, using: &random)
            let text = String((0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &random)] })
            if let value = try? GVariantText.parse(text) {
                #expect((try? value.validate()) != nil, "\(text)")
            }
        }
    }

    @Test func mutatedValidTextNeverCrashesTheParser() {
        var generator = DBusValueGenerator(seed: 7)
        var random = SeededGenerator(seed: 8)
        let inserts = Array("[](){}<>,:@'\"\\ 0x.")
        for _ in 0..<2_000 {
            var characters = Array(GVariantText.format(generator.value()))
            guard !characters.isEmpty else { continue }
            let position = Int.random(in: 0..<characters.count, using: &random)
            if Bool.random(using: &random) {
                characters.remove(at: position)
            } else {
                characters.insert(inserts[Int.random(in: 0..<inserts.count, using: &random)], at: position)
            }
            let text = String(characters)
            if let value = try? GVariantText.parse(text) {
                #expect((try? value.validate()) != nil, "\(text)")
            }
        }
    }
}
