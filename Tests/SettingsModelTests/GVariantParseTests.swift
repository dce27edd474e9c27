// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

struct GVariantParseTests {
    /// Texts and the values GLib's `g_variant_parse (NULL, text, …)` makes of them.
    static let inferred: [(String, DBusValue)] = [
        ("true", .boolean(true)),
        ("false", .boolean(false)),
        ("5", .int32(5)),
        ("-5", .int32(-5)),
        ("+5", .int32(5)),
        ("-0", .int32(0)),
        ("0x1f", .int32(31)),
        ("-0x1f", .int32(-31)),
        ("0X1F", .int32(31)),
        ("010", .int32(8)),
        ("  5  ", .int32(5)),
        ("-2147483648", .int32(Int32.min)),
        ("5.0", .double(5)),
        ("1.5", .double(1.5)),
        ("1.", .double(1)),
        (".5", .double(0.5)),
        ("1e3", .double(1000)),
        ("1.5e-3", .double(0.0015)),
        ("-0.0", .double(-0.0)),
        ("inf", .double(.infinity)),
        ("-inf", .double(-.infinity)),
        ("0x1.8p1", .double(3)),
        ("-0x1e", .double(-30)),
        ("0x1e", .int32(30)),
        ("1e-400", .double(0)),
        ("5e-324", .double(.leastNonzeroMagnitude)),
        ("byte 0x05", .byte(5)),
        ("byte 255", .byte(255)),
        ("byte -0", .byte(0)),
        ("int16 -32768", .int16(Int16.min)),
        ("uint16 65535", .uint16(UInt16.max)),
        ("int32 7", .int32(7)),
        ("uint32 4294967295", .uint32(UInt32.max)),
        ("int64 -9223372036854775808", .int64(Int64.min)),
        ("uint64 18446744073709551615", .uint64(UInt64.max)),
        ("double 1", .double(1)),
        ("boolean true", .boolean(true)),
        ("string 'x'", .string("x")),
        ("objectpath '/a/b'", .objectPath("/a/b")),
        ("@o '/a'", .objectPath("/a")),
        ("signature 'as'", .signature(TestValues.signature("as"))),
        ("@g 'a{sv}'", .signature(TestValues.signature("a{sv}"))),
        ("int64 int64 5", .int64(5)),
        ("'x'", .string("x")),
        ("\"x\"", .string("x")),
        ("'it\\'s'", .string("it's")),
        ("\"it's\"", .string("it's")),
        ("'a\"b'", .string("a\"b")),
        ("\"a\\\"b\"", .string("a\"b")),
        ("'\\a\\b\\f\\n\\r\\t\\v\\\\'", .string("\u{7}\u{8}\u{C}\n\r\t\u{B}\\")),
        ("'\\u00e9\\u20AC\\U0001F600'", .string("é€😀")),
        ("'\\x41\\101\\q'", .string("x41101q")),
        ("'a\\\nb'", .string("ab")),
        ("'é€😀'", .string("é€😀")),
        ("b'abc'", .array(.byte, [.byte(0x61), .byte(0x62), .byte(0x63), .byte(0)])),
        ("b\"ab'c\"", .array(.byte, [.byte(0x61), .byte(0x62), .byte(0x27), .byte(0x63), .byte(0)])),
        ("b''", .array(.byte, [.byte(0)])),
        ("b'a\\0b'", .array(.byte, [.byte(0x61), .byte(0)])),
        ("b'\\777\\101\\x\\n'", .array(.byte, [.byte(0xFF), .byte(0x41), .byte(0x78), .byte(0x0A), .byte(0)])),
        ("<1>", .variant(.int32(1))),
        ("<<'x'>>", .variant(.variant(.string("x")))),
        ("<@as []>", .variant(.array(.string, []))),
        ("[1, 2]", .array(.int32, [.int32(1), .int32(2)])),
        ("[1, int64 2]", .array(.int64, [.int64(1), .int64(2)])),
        ("[int64 1, 2]", .array(.int64, [.int64(1), .int64(2)])),
        ("[1.0, 2]", .array(.double, [.double(1), .double(2)])),
        ("[1, 2.0]", .array(.double, [.double(1), .double(2)])),
        ("[double 1, 2]", .array(.double, [.double(1), .double(2)])),
        ("['/a', objectpath '/b']", .array(.objectPath, [.objectPath("/a"), .objectPath("/b")])),
        ("[byte 0x61, 0x62]", .array(.byte, [.byte(0x61), .byte(0x62)])),
        ("@as []", .array(.string, [])),
        ("[@as [], []]", .array(.array(.string), [.array(.string, []), .array(.string, [])])),
        ("[[1], [int64 2]]", .array(.array(.int64), [.array(.int64, [.int64(1)]), .array(.int64, [.int64(2)])])),
        ("[<1>, <'a'>]", .array(.variant, [.variant(.int32(1)), .variant(.string("a"))])),
        ("{'a': <1>}", .dictionary(key: .string, value: .variant, [.init(key: .string("a"), value: .variant(.int32(1)))])),
        ("@a{sv} {}", .dictionary(key: .string, value: .variant, [])),
        ("@a{sv} []", .dictionary(key: .string, value: .variant, [])),
        ("{1: 'x', 2: 'y'}", .dictionary(key: .int32, value: .string, [
            .init(key: .int32(1), value: .string("x")), .init(key: .int32(2), value: .string("y")),
        ])),
        ("{'a': 1, 'b': 1.5}", .dictionary(key: .string, value: .double, [
            .init(key: .string("a"), value: .double(1)), .init(key: .string("b"), value: .double(1.5)),
        ])),
        ("[{1, 'x'}]", .dictionary(key: .int32, value: .string, [.init(key: .int32(1), value: .string("x"))])),
        ("[{}, {'a': 1}]", .array(.dictionary(key: .string, value: .int32), [
            .dictionary(key: .string, value: .int32, []),
            .dictionary(key: .string, value: .int32, [.init(key: .string("a"), value: .int32(1))]),
        ])),
        ("{true: 1}", .dictionary(key: .boolean, value: .int32, [.init(key: .boolean(true), value: .int32(1))])),
        ("(1, 'x')", .structure([.int32(1), .string("x")])),
        ("(1,)", .structure([.int32(1)])),
        ("(int16 1, uint16 2)", .structure([.int16(1), .uint16(2)])),
        ("@(s) ('a',)", .structure([.string("a")])),
        ("[(1, 'a'), (int64 2, 'b')]", .array(.structure([.int64, .string]), [
            .structure([.int64(1), .string("a")]), .structure([.int64(2), .string("b")]),
        ])),
        ("(@ax [],)", .structure([.array(.int64, [])])),
        ("\t[ 1 ,2 ]\n", .array(.int32, [.int32(1), .int32(2)])),
    ]

    @Test(arguments: inferred)
    func parsesAsGLibDoes(_ text: String, _ expected: DBusValue) throws {
        let value = try GVariantText.parse(text)
        #expect(TestValues.identical(value, expected), "\(value) != \(expected)")
    }

    @Test func parsesNaN() throws {
        guard case .double(let number) = try GVariantText.parse("nan") else {
            Issue.record("nan is not a double")
            return
        }
        #expect(number.isNaN)
    }

    @Test(arguments: [
        ("5", DBusType.double, DBusValue.double(5)),
        ("5", .uint32, .uint32(5)),
        ("5", .byte, .byte(5)),
        ("0x05", .byte, .byte(5)),
        ("-5", .int64, .int64(-5)),
        ("1e3", .double, .double(1000)),
        ("[]", .array(.string), .array(.string, [])),
        ("{}", .dictionary(key: .string, value: .variant), .dictionary(key: .string, value: .variant, [])),
        ("[]", .dictionary(key: .string, value: .variant), .dictionary(key: .string, value: .variant, [])),
        ("'/a'", .objectPath, .objectPath("/a")),
        ("'as'", .signature, .signature(TestValues.signature("as"))),
        ("[1, 2]", .array(.uint64), .array(.uint64, [.uint64(1), .uint64(2)])),
        ("(1, [])", .structure([.byte, .array(.int16)]), .structure([.byte(1), .array(.int16, [])])),
        ("<5>", .variant, .variant(.int32(5))),
        ("uint32 7", .uint32, .uint32(7)),
        ("{'a': [1]}", .dictionary(key: .string, value: .array(.double)),
         .dictionary(key: .string, value: .array(.double), [.init(key: .string("a"), value: .array(.double, [.double(1)]))])),
    ])
    func parsesAgainstARegisteredType(_ text: String, _ type: DBusType, _ expected: DBusValue) throws {
        let value = try GVariantText.parse(text, as: type)
        #expect(TestValues.identical(value, expected), "\(value) != \(expected)")
    }

    @Test(arguments: [
        ("'x'", DBusType.uint32, "expected a value of type 'u' but found a string"),
        ("5", .string, "expected a value of type 's' but found the number 5"),
        ("1.5", .int32, "not an integer"),
        ("5", .variant, "a variant is written <value>"),
        ("int64 5", .uint32, "expected a value of type 'u' but found a value annotated as type 'x'"),
        ("[1]", .string, "found an array"),
        ("(1, 2)", .structure([.int32]), "found a tuple of 2 fields"),
        ("{'a': 1}", .array(.string), "found a dictionary"),
        ("['a']", .dictionary(key: .string, value: .string), "expected a dictionary entry"),
        ("true", .int32, "found a boolean"),
        ("b'x'", .string, "found a byte string"),
    ])
    func reportsTypeMismatches(_ text: String, _ type: DBusType, _ message: String) {
        let error = #expect(throws: GVariantTextError.self) { try GVariantText.parse(text, as: type) }
        #expect(error?.code == .typeMismatch)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    @Test(arguments: [
        ("byte 300", GVariantTextError.Code.outOfRange, "out of range for type 'y'"),
        ("byte -1", .outOfRange, "out of range for type 'y'"),
        ("uint32 -1", .outOfRange, "number -1 is out of range for type 'u'"),
        ("int16 32768", .outOfRange, "out of range"),
        ("-2147483649", .outOfRange, "out of range for type 'i'"),
        ("2147483648", .outOfRange, "out of range for type 'i'"),
        ("uint64 -1", .outOfRange, "out of range"),
        ("18446744073709551616", .outOfRange, "too big for any type"),
        ("1e400", .outOfRange, "too big for any type"),
        ("-1e400", .outOfRange, "too big for any type"),
        ("08", .syntax, "invalid character '8'"),
        ("0x", .syntax, "invalid character 'x'"),
        ("1E5", .syntax, "invalid character 'E'"),
        ("1.2.3", .syntax, "not a valid number"),
        ("'abc", .syntax, "unterminated string"),
        ("'abc\\", .syntax, "unterminated string"),
        ("b'abc", .syntax, "unterminated string"),
        ("\"abc'", .syntax, "unterminated string"),
        ("'\\u12'", .syntax, "invalid 4-character unicode escape"),
        ("'\\u0x12'", .syntax, "invalid 4-character unicode escape"),
        ("'\\U0001F60'", .syntax, "invalid 8-character unicode escape"),
        ("'\\u0000'", .invalidValue, "cannot contain NUL"),
        ("'\\ud800'", .invalidValue, "not a Unicode character"),
        ("'\\U00110000'", .invalidValue, "not a Unicode character"),
        ("", .syntax, "expected a value but the text ended"),
        ("   ", .syntax, "expected a value but the text ended"),
        ("[1,]", .syntax, "expected a value but found ']'"),
        ("[1 2]", .syntax, "expected ',' or ']' after an array element but found '2'"),
        ("(1)", .syntax, "expected ',' after the first tuple field"),
        ("(1, 2,)", .syntax, "expected a value but found ')'"),
        ("{1: 2,}", .syntax, "expected a value but found '}'"),
        ("{1 2}", .syntax, "expected ':' or ',' after a dictionary key"),
        ("<1", .syntax, "expected '>' to close the variant but the text ended"),
        ("true false", .syntax, "expected the end of the text after the value but found 'false'"),
        ("True", .syntax, "expected a value but found 'T'"),
        ("flase", .syntax, "unknown keyword 'flase'"),
        ("nothing", .unsupported, "D-Bus has no maybe types"),
        ("just 5", .unsupported, "D-Bus has no maybe types"),
        ("@mi 5", .unsupported, "maybe type"),
        ("()", .unsupported, "empty tuple"),
        ("@() ()", .unsupported, "empty tuple type"),
        ("handle 5", .unsupported, "unix file descriptors"),
        ("@h 5", .unsupported, "unix file descriptor"),
        ("{1, 'x'}", .unsupported, "dictionary entry {key, value}"),
        ("@{sv} {'a', <1>}", .unsupported, "dictionary entry type"),
        ("@* 5", .syntax, "type annotations must be definite"),
        ("@ 5", .syntax, "'@' must be followed by a type"),
        ("@ass []", .syntax, "more than one complete type"),
        ("@a{vs} {}", .syntax, "dictionary key must have a basic type"),
        ("@z 5", .syntax, "'z' is not a type code"),
        ("[]", .cannotInferType, "write the type, as in @as []"),
        ("{}", .cannotInferType, "@a{sv} {}"),
        ("[[], []]", .cannotInferType, "cannot infer"),
        ("[1, 'a']", .typeMismatch, "unable to find a common type: array element 2"),
        ("[{'a': 1}, {'b', 2}]", .typeMismatch, "common type"),
        ("{[1]: 2}", .typeMismatch, "dictionary keys must have basic types"),
        ("{<1>: 2}", .typeMismatch, "dictionary keys must have basic types"),
        ("objectpath 'bad'", .invalidValue, "not a valid object path"),
        ("signature 'a'", .invalidValue, "not a valid signature"),
        ("int64 uint32 5", .typeMismatch, "annotated as type 'u'"),
        ("int64 int64 int64 int64 int64 5", .syntax, "type annotations in a row"),
        ("%i", .syntax, "expected a value but found '%'"),
        ("5\u{0}", .syntax, "NUL character"),
        ("'\u{0}'", .syntax, "NUL character"),
    ])
    func reportsErrorsClearly(_ text: String, _ code: GVariantTextError.Code, _ message: String) {
        let error = #expect(throws: GVariantTextError.self) { try GVariantText.parse(text) }
        #expect(error?.code == code, "\(error?.description ?? "")")
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "")")
    }

    @Test func reportsTheOffsetOfTheProblem() {
        let error = #expect(throws: GVariantTextError.self) { try GVariantText.parse("[1, 2, 'x']") }
        #expect(error?.offset == 7)
        #expect(error?.description.hasPrefix("byte 7: ") == true)
        let range = #expect(throws: GVariantTextError.self) { try GVariantText.parse("uint32 -1") }
        #expect(range?.offset == 7)
    }

    @Test func turnsErrorsIntoSettingsErrors() throws {
        let key = try SettingPath("/org/example/volume")
        let mismatch = GVariantTextError(.typeMismatch, at: 0, "m")
        #expect(mismatch.settingsError(for: key).code == .typeMismatch)
        #expect(mismatch.settingsError(for: key).message.contains("/org/example/volume"))
        #expect(GVariantTextError(.outOfRange, at: 0, "m").settingsError(for: key).code == .outOfRange)
        #expect(GVariantTextError(.tooDeep, at: 0, "m").settingsError(for: key).code == .tooLarge)
        #expect(GVariantTextError(.syntax, at: 0, "m").settingsError(for: key).code == .invalidValue)
    }
}
