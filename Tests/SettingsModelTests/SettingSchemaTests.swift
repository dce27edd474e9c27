// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

struct SettingSchemaTests {
    static let volume = SettingSchema(
        defaultValue: .uint32(50), summary: "Output volume", range: SettingRange(min: .uint32(0), max: .uint32(100)))
    static let theme = SettingSchema(
        defaultValue: .string("system"), choices: [.string("light"), .string("dark"), .string("system")])

    @Test func acceptsValuesOfItsTypeInRange() throws {
        let key = try SettingPath("/org/example/volume")
        try Self.volume.validate()
        try Self.volume.validate(.uint32(0), for: key)
        try Self.volume.validate(.uint32(100), for: key)
        try Self.theme.validate()
        try Self.theme.validate(.string("dark"), for: key)
    }

    @Test func refusesValuesOutOfRangeWithAClearMessage() throws {
        let key = try SettingPath("/org/example/volume")
        let error = #expect(throws: SettingsError.self) { try Self.volume.validate(.uint32(120), for: key) }
        #expect(error?.code == .outOfRange)
        #expect(error?.message == "value 120 is out of range 0…100 for /org/example/volume")
    }

    @Test func refusesValuesOfAnotherType() throws {
        let key = try SettingPath("/org/example/volume")
        let error = #expect(throws: SettingsError.self) { try Self.volume.validate(.int32(5), for: key) }
        #expect(error?.code == .typeMismatch)
        #expect(error?.message.contains("type 'i' cannot be stored in /org/example/volume, whose type is 'u'") == true)
    }

    @Test func refusesValuesThatAreNotAChoice() throws {
        let key = try SettingPath("/org/example/theme")
        let error = #expect(throws: SettingsError.self) { try Self.theme.validate(.string("blue"), for: key) }
        #expect(error?.code == .outOfRange)
        #expect(error?.message == "value 'blue' is not one of the choices 'light', 'dark', 'system' for /org/example/theme")
    }

    @Test(arguments: [
        (DBusValue.double(-0.5), false), (.double(0), true), (.double(1), true), (.double(1.0000001), false),
        (.double(.nan), false), (.double(.infinity), false),
    ])
    func comparesDoublesNumerically(_ value: DBusValue, _ inRange: Bool) {
        #expect(SettingRange(min: .double(0), max: .double(1)).contains(value) == inRange)
    }

    @Test func comparesAcrossIntegerAndDoubleCasesExactly() {
        #expect(SettingRange(min: .int64(-1), max: .uint64(.max)).contains(.int32(0)))
        #expect(!SettingRange(min: .int64(0), max: .uint64(.max)).contains(.int64(-1)))
        #expect(SettingRange(min: .double(-1.5), max: .double(2.5)).contains(.int64(2)))
        #expect(!SettingRange(min: .double(-1.5), max: .double(2.5)).contains(.int64(3)))
        #expect(!SettingRange(min: .int64(0), max: .double(9007199254740992)).contains(.int64(9007199254740993)))
        #expect(SettingRange(min: .uint64(0), max: .double(1e30)).contains(.uint64(.max)))
        #expect(!SettingRange(min: .int64(.min), max: .int64(0)).contains(.double(-1e30)))
        #expect(!SettingRange(min: .string("a"), max: .string("z")).contains(.string("m")))
    }

    @Test(arguments: [
        (SettingSchema(type: .uint32, defaultValue: .int32(1)), "has type 'i', not the schema's type 'u'"),
        (SettingSchema(defaultValue: .string("x"), range: SettingRange(min: .string("a"), max: .string("z"))),
         "a range is only allowed on numeric types"),
        (SettingSchema(defaultValue: .uint32(5), range: SettingRange(min: .int32(0), max: .uint32(9))),
         "the range minimum 0 has type 'i'"),
        (SettingSchema(defaultValue: .uint32(5), range: SettingRange(min: .uint32(9), max: .uint32(0))),
         "is not at most the maximum"),
        (SettingSchema(defaultValue: .double(5), range: SettingRange(min: .double(.nan), max: .double(9))),
         "is not at most the maximum"),
        (SettingSchema(defaultValue: .uint32(500), range: SettingRange(min: .uint32(0), max: .uint32(100))),
         "the default value does not pass the schema's checks: value 500 is out of range 0…100"),
        (SettingSchema(defaultValue: .string("x"), choices: []), "the list of choices is empty"),
        (SettingSchema(defaultValue: .string("x"), choices: [.string("x"), .int32(1)]), "the choice 1 has type 'i'"),
        (SettingSchema(defaultValue: .string("x"), choices: [.string("y")]), "is not one of the choices 'y'"),
        (SettingSchema(type: .dictionary(key: .variant, value: .string),
                       defaultValue: .dictionary(key: .variant, value: .string, [])),
         "not a valid D-Bus type"),
        (SettingSchema(defaultValue: .string("a\u{0}b")), "not a valid D-Bus value"),
    ])
    func refusesUnsoundSchemas(_ schema: SettingSchema, _ message: String) throws {
        let error = #expect(throws: SettingsError.self) { try schema.validate(for: SettingPath("/org/example/k")) }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.hasPrefix("invalid schema for /org/example/k: ") == true)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    @Test func identicalSchemasAreEqual() {
        let again = SettingSchema(
            type: .uint32, defaultValue: .uint32(50), summary: "Output volume",
            range: SettingRange(min: .uint32(0), max: .uint32(100)))
        #expect(again == Self.volume)
        var secret = again
        secret.isSecret = true
        #expect(secret != Self.volume)
    }
}
