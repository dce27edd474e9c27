// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

/// Which values convert to another type without loss: what the broker converts instead of refusing a value
/// or serving a default.
struct ValueConversionTests {
    @Test(arguments: [
        (DBusValue.int32(14), DBusType.int64, DBusValue.int64(14)),
        (.int32(-14), .int64, .int64(-14)),
        (.uint32(4_000_000_000), .int64, .int64(4_000_000_000)),
        (.uint32(7), .uint64, .uint64(7)),
        (.byte(255), .int16, .int16(255)),
        (.byte(255), .uint64, .uint64(255)),
        (.int16(-3), .int32, .int32(-3)),
        (.uint16(65535), .int32, .int32(65535)),
        (.int32(3), .double, .double(3)),
        (.int64(9_007_199_254_740_992), .double, .double(9_007_199_254_740_992)),
        (.array(.int32, [.int32(1), .int32(2)]), .array(.int64), .array(.int64, [.int64(1), .int64(2)])),
        (.string("same"), .string, .string("same")),
    ])
    func aWideningConversionKeepsTheValue(_ value: DBusValue, _ type: DBusType, _ expected: DBusValue) {
        #expect(value.losslesslyConverted(to: type) == expected)
    }

    @Test(arguments: [
        (DBusValue.int64(14), DBusType.int32),
        (.int32(-1), .uint32),
        (.int32(1), .uint64),
        (.uint32(1), .int32),
        (.uint64(1), .int64),
        (.int64(9_007_199_254_740_993), .double),
        (.double(3), .int32),
        (.string("14"), .int64),
        (.boolean(true), .int32),
        (.array(.int32, [.int32(1)]), .array(.uint32)),
    ])
    func anythingElseDoesNotConvert(_ value: DBusValue, _ type: DBusType) {
        #expect(value.losslesslyConverted(to: type) == nil)
    }
}
