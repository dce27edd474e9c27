// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

struct GVariantRoundTripTests {
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func annotatedTextParsesBackToTheSameValue(seed: UInt64) throws {
        var generator = DBusValueGenerator(seed: seed)
        for _ in 0..<1_000 {
            let value = generator.value()
            let text = GVariantText.format(value)
            let parsed = try GVariantText.parse(text)
            #expect(TestValues.identical(parsed, value), "\(text)")
            #expect(GVariantText.format(parsed) == text)
            let typed = try GVariantText.parse(text, as: value.type)
            #expect(TestValues.identical(typed, value), "\(text) as \(value.type)")
        }
    }

    @Test(arguments: [5, 6] as [UInt64])
    func unannotatedTextParsesBackAgainstTheType(seed: UInt64) throws {
        var generator = DBusValueGenerator(seed: seed)
        for _ in 0..<1_000 {
            let value = generator.value()
            let text = GVariantText.format(value, annotateTypes: false)
            let parsed = try GVariantText.parse(text, as: value.type)
            #expect(TestValues.identical(parsed, value), "\(text) as \(value.type)")
        }
    }

    @Test(arguments: [
        DBusValue.int16(.min), .int16(.max), .uint16(.max), .int32(.min), .int32(.max), .uint32(.max),
        .int64(.min), .int64(.max), .uint64(.max), .byte(0), .byte(.max),
        .double(0.1), .double(1e-300), .double(-0.0), .double(.leastNonzeroMagnitude), .double(.greatestFiniteMagnitude),
        .double(.infinity), .double(-.infinity), .double(.nan),
        .string("quotes ' and \" and \\ and\nnew\tlines \u{1}\u{7F} é 😀 \u{FEFF}"),
        .string("only 'single'"), .string("\""), .string("'"), .string("\\"),
        .variant(.variant(.variant(.array(.string, [])))),
        .dictionary(key: .string, value: .variant, [
            .init(key: .string("a"), value: .variant(.dictionary(key: .string, value: .variant, []))),
            .init(key: .string("b"), value: .variant(.structure([.int64(1), .array(.byte, [])]))),
        ]),
        .array(.array(.array(.int64)), [.array(.array(.int64), []), .array(.array(.int64), [.array(.int64, [])])]),
        .array(.byte, [.byte(0x27), .byte(0)]), .array(.byte, [.byte(0), .byte(0)]),
    ])
    func edgeValuesRoundTrip(_ value: DBusValue) throws {
        let text = GVariantText.format(value)
        #expect(TestValues.identical(try GVariantText.parse(text), value), "\(text)")
    }

    @Test func valuesNestedSixtyFourLevelsRoundTrip() throws {
        var value = DBusValue.int32(1)
        for _ in 0..<64 { value = .variant(value) }
        #expect(TestValues.identical(try GVariantText.parse(GVariantText.format(value)), value))
        let tooDeep = String(repeating: "<", count: 65) + "1" + String(repeating: ">", count: 65)
        let error = #expect(throws: GVariantTextError.self) { try GVariantText.parse(tooDeep) }
        #expect(error?.code == .tooDeep)
    }

    @Test func arraysNestedBeyondDBusLimitsAreRefused() {
        let text = String(repeating: "[", count: 33) + "1" + String(repeating: "]", count: 33)
        let error = #expect(throws: GVariantTextError.self) { try GVariantText.parse(text) }
        #expect(error?.code == .tooDeep)
        #expect(error?.message.contains("D-Bus cannot carry this value") == true)
    }
}
