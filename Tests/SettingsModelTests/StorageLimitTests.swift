// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

struct StorageLimitTests {
    @Test func approximateSizeBoundsTheWireSizeAndGrowsWithTheValue() {
        #expect(DBusValue.byte(1).approximateSize >= 1)
        #expect(DBusValue.string("abc").approximateSize >= 4 + 3 + 1)
        let small = DBusValue.array(.string, [.string("a")])
        let large = DBusValue.array(.string, [.string("a"), .string("b")])
        #expect(large.approximateSize > small.approximateSize)
        #expect(DBusValue.variant(.int64(1)).approximateSize >= 3 + 8)
    }

    @Test func refusesValuesNestedDeeperThanSixtyLevels() throws {
        let key = try SettingPath("/org/example/deep")
        var value = DBusValue.int32(1)
        for _ in 0..<60 { value = .variant(value) }
        try value.validateForStorage(at: key)
        let error = #expect(throws: SettingsError.self) { try DBusValue.variant(value).validateForStorage(at: key) }
        #expect(error?.code == .tooLarge)
        #expect(error?.message.contains("61 levels deep") == true)
    }

    @Test func refusesValuesLargerThanOneMebibyte() throws {
        let key = try SettingPath("/org/example/big")
        try DBusValue.string(String(repeating: "x", count: 1_000_000)).validateForStorage(at: key)
        let error = #expect(throws: SettingsError.self) {
            try DBusValue.string(String(repeating: "x", count: 1 << 20)).validateForStorage(at: key)
        }
        #expect(error?.code == .tooLarge)
    }

    @Test func refusesValuesDBusCannotCarry() throws {
        let key = try SettingPath("/org/example/bad")
        let error = #expect(throws: SettingsError.self) { try DBusValue.string("a\u{0}").validateForStorage(at: key) }
        #expect(error?.code == .invalidValue)
        #expect(throws: SettingsError.invalidValue("")) {
            try DBusValue.array(.string, [.int32(1)]).validateForStorage(at: key)
        }
    }
}
