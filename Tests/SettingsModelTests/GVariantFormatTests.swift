// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

struct GVariantFormatTests {
    /// Values and what GLib's `g_variant_print (value, TRUE)` prints for them.
    static let annotated: [(DBusValue, String)] = [
        (.boolean(true), "true"),
        (.boolean(false), "false"),
        (.byte(5), "byte 0x05"),
        (.byte(255), "byte 0xff"),
        (.int16(-5), "int16 -5"),
        (.uint16(5), "uint16 5"),
        (.int32(5), "5"),
        (.int32(Int32.min), "-2147483648"),
        (.uint32(7), "uint32 7"),
        (.int64(5), "int64 5"),
        (.int64(Int64.min), "int64 -9223372036854775808"),
        (.uint64(UInt64.max), "uint64 18446744073709551615"),
        (.double(0.5), "0.5"),
        (.double(1), "1.0"),
        (.double(-0.0), "-0.0"),
        (.double(0.1), "0.10000000000000001"),
        (.double(1e100), "1e+100"),
        (.double(1e16), "10000000000000000.0"),
        (.double(1e-300), "1e-300"),
        (.double(.infinity), "inf"),
        (.double(-.infinity), "-inf"),
        (.double(.nan), "nan"),
        (.string("x"), "'x'"),
        (.string(""), "''"),
        (.string("it's"), "\"it's\""),
        (.string("a\"b"), "'a\"b'"),
        (.string("a\"b'c"), "\"a\\\"b'c\""),
        (.string("back\\slash"), "'back\\\\slash'"),
        (.string("\u{7}\u{8}\u{C}\n\r\t\u{B}"), "'\\a\\b\\f\\n\\r\\t\\v'"),
        (.string("\u{1}\u{7F}"), "'\\u0001\\u007f'"),
        (.string("é€😀"), "'é€😀'"),
        (.string("\u{AD}\u{FEFF}\u{E0001}"), "'\\u00ad\\ufeff\\U000e0001'"),
        (.objectPath("/a/b"), "objectpath '/a/b'"),
        (.signature(TestValues.signature("a{sv}")), "signature 'a{sv}'"),
        (.variant(.int32(1)), "<1>"),
        (.variant(.uint32(1)), "<uint32 1>"),
        (.variant(.variant(.string("x"))), "<<'x'>>"),
        (.array(.int32, [.int32(1), .int32(2)]), "[1, 2]"),
        (.array(.int64, [.int64(1), .int64(2)]), "[int64 1, 2]"),
        (.array(.string, []), "@as []"),
        (.array(.array(.string), [.array(.string, []), .array(.string, [.string("x")])]), "[@as [], ['x']]"),
        (.array(.array(.string), [.array(.string, [.string("x")]), .array(.string, [])]), "[['x'], []]"),
        (.array(.byte, [.byte(0x61), .byte(0x62), .byte(0)]), "b'ab'"),
        (.array(.byte, [.byte(0)]), "b''"),
        (.array(.byte, [.byte(0x27), .byte(0x22), .byte(0)]), "b\"'\\\"\""),
        (.array(.byte, [.byte(7), .byte(0x7F), .byte(0xFF), .byte(0x5C), .byte(0)]), "b'\\007\\177\\377\\\\'"),
        (.array(.byte, [.byte(1), .byte(2)]), "[byte 0x01, 0x02]"),
        (.array(.byte, [.byte(0x61), .byte(0), .byte(0x62), .byte(0)]), "[byte 0x61, 0x00, 0x62, 0x00]"),
        (.array(.byte, []), "@ay []"),
        (.dictionary(key: .string, value: .variant, [.init(key: .string("a"), value: .variant(.int32(1)))]),
         "{'a': <1>}"),
        (.dictionary(key: .string, value: .variant, []), "@a{sv} {}"),
        (.dictionary(key: .int64, value: .int64, [
            .init(key: .int64(1), value: .int64(2)), .init(key: .int64(3), value: .int64(4)),
        ]), "{int64 1: int64 2, 3: 4}"),
        (.structure([.int32(1), .string("x")]), "(1, 'x')"),
        (.structure([.int32(1)]), "(1,)"),
        (.structure([.int16(1), .uint16(2)]), "(int16 1, uint16 2)"),
        (.structure([.array(.int64, []), .variant(.array(.string, []))]), "(@ax [], <@as []>)"),
    ]

    @Test(arguments: annotated)
    func printsAsGLibDoes(_ value: DBusValue, _ expected: String) {
        #expect(GVariantText.format(value) == expected)
    }

    @Test(arguments: [
        (DBusValue.uint32(7), "7"),
        (.byte(5), "0x05"),
        (.objectPath("/a"), "'/a'"),
        (.array(.string, []), "[]"),
        (.dictionary(key: .string, value: .string, []), "{}"),
        (.array(.int64, [.int64(1), .int64(2)]), "[1, 2]"),
        (.variant(.int64(5)), "<int64 5>"),
        (.structure([.int16(1)]), "(1,)"),
    ])
    func printsWithoutAnnotationsOutsideVariants(_ value: DBusValue, _ expected: String) {
        #expect(GVariantText.format(value, annotateTypes: false) == expected)
    }
}
