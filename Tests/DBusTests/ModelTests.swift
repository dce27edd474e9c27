// SPDX-License-Identifier: Apache-2.0

import DBus
import Testing
import TestMachine

/// The value, signature and name model, with no bus: what parses, what validates, and what is refused.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ModelTests {
    static func repeated(_ text: String, _ count: Int) -> String { String(repeating: text, count: count) }

    static func nested(_ depth: Int, _ inner: DBusValue, _ wrap: (DBusValue) -> DBusValue) -> DBusValue {
        (0..<depth).reduce(inner) { value, _ in wrap(value) }
    }

    // MARK: - Signatures

    static let validSignatures: [String] = [
        "", "y", "b", "n", "q", "i", "u", "x", "t", "d", "s", "o", "g", "v", "as", "ay", "aay", "a{sv}", "a{ia{ss}}",
        "a{s(ii)}", "(iis)as", "sa{sv}(ii)", "((i))", "av", "a{ov}", "a{gs}", "a{bd}",
        repeated("s", 255),
        repeated("a", 32) + "s",
        repeated("(", 32) + "s" + repeated(")", 32),
        repeated("a(", 32) + "s" + repeated(")", 32),
        repeated("a{s", 31) + "a{ss}" + repeated("}", 31),
    ]

    static let invalidSignatures: [String] = [
        "a", "aa", "{sv}", "a{vs}", "a{(i)s}", "a{ays}", "a{s}", "a{sss}", "a{sv", "a{}", "()", "(", "(s", "s)", ")",
        "h", "ah", "a{sh}", "z", "A", " ", "s ", "é", "s\0", "\0",
        repeated("s", 256),
        repeated("a", 33) + "s",
        repeated("(", 33) + "s" + repeated(")", 33),
        repeated("a{s", 32) + "a{ss}" + repeated("}", 32),
    ]

    @Test(arguments: validSignatures)
    func parsesValidSignature(_ text: String) throws {
        let signature = try Signature(text)
        #expect(signature.text == text)
        #expect(Signature(types: signature.types).text == text)
    }

    @Test(arguments: invalidSignatures)
    func refusesInvalidSignature(_ text: String) {
        let error = #expect(throws: DBusError.self) { try Signature(text) }
        #expect(error?.name == .invalidSignature)
    }

    @Test func splitsSignaturesIntoCompleteTypes() throws {
        #expect(try Signature("sa{sv}(ii)").types == [
            .string, .dictionary(key: .string, value: .variant), .structure([.int32, .int32]),
        ])
        #expect(try DBusType(parsing: "a{sv}") == .dictionary(key: .string, value: .variant))
        #expect(throws: DBusError.self) { try DBusType(parsing: "ss") }
        #expect(throws: DBusError.self) { try DBusType(parsing: "") }
    }

    // MARK: - Values

    @Test func aValueHoldsNumbersTextAndArraysInPlace() {
        // Only a variant, a dictionary and a signature are boxed; the rest sit in the 17 bytes of the value.
        #expect(MemoryLayout<DBusValue>.size == 17)
        #expect(MemoryLayout<DBusDictEntry>.stride == 48)
    }

    @Test func validValuesPass() throws {
        let values: [DBusValue] = [
            .string(""), .string("grüße ✓"), .array(.string, []), .array(.byte, [.byte(1)]),
            .dictionary(key: .string, value: .variant, [.init(key: .string("k"), value: .variant(.int32(1)))]),
            .structure([.int32(1), .variant(.structure([.boolean(true)]))]),
            .signature(try Signature("a{sv}")), .signature(Signature(types: [.array(.variant)])),
            Self.nested(63, .int32(1)) { .variant($0) },
            Self.nested(64, .int32(1)) { .variant($0) },
            Self.nested(32, .byte(1)) { .array($0.type, [$0]) },
            Self.nested(32, .variant(Self.nested(31, .byte(1)) { .array($0.type, [$0]) })) { .array($0.type, [$0]) },
        ]
        for value in values { try value.validate() }
    }

    @Test func nulInsideAnyStringIsRefused() {
        let bad = DBusValue.string("a\0b")
        let values: [DBusValue] = [
            bad, .variant(bad), .array(.string, [.string("ok"), bad]), .structure([.int32(1), bad]),
            .dictionary(key: .string, value: .int32, [.init(key: bad, value: .int32(1))]),
            .dictionary(key: .int32, value: .variant, [.init(key: .int32(1), value: .variant(.variant(bad)))]),
        ]
        for value in values {
            let error = #expect(throws: DBusError.self) { try value.validate() }
            #expect(error?.name == .invalidArgs)
            #expect(error?.message.contains("NUL") == true)
        }
    }

    @Test func mismatchedElementsAreRefused() {
        let values: [DBusValue] = [
            .array(.string, [.int32(1)]),
            .array(.string, [.string("a"), .objectPath("/a")]),
            .array(.variant, [.int32(1)]),
            .dictionary(key: .string, value: .int32, [.init(key: .int32(1), value: .int32(1))]),
            .dictionary(key: .string, value: .int32, [.init(key: .string("a"), value: .uint32(1))]),
            .array(.array(.int32), [.array(.int16, [])]),
            .variant(.array(.string, [.boolean(true)])),
        ]
        for value in values {
            let error = #expect(throws: DBusError.self) { try value.validate() }
            #expect(error?.name == .invalidArgs, "\(value)")
        }
    }

    @Test func valuesOfInvalidTypesAreRefused() {
        let values: [DBusValue] = [
            .structure([]),
            .array(.structure([]), []),
            .dictionary(key: .variant, value: .string, []),
            .dictionary(key: .array(.byte), value: .string, []),
            Self.nested(33, .byte(1)) { .array($0.type, [$0]) },
            Self.nested(33, .byte(1)) { .structure([$0]) },
            // Signature values built from unchecked types.
            .signature(Signature(types: [.structure([])])),
            .signature(Signature(types: [.dictionary(key: .variant, value: .string)])),
            .signature(Signature(types: Array(repeating: .string, count: 256))),
            .signature(Signature(.array(Self.nestedType(33)))),
            .variant(.signature(Signature(types: [.structure([])]))),
        ]
        for value in values {
            let error = #expect(throws: DBusError.self) { try value.validate() }
            #expect(error?.name == .invalidArgs, "\(value.type)")
        }
    }

    static func nestedType(_ depth: Int) -> DBusType {
        (0..<depth).reduce(DBusType.byte) { type, _ in .array(type) }
    }

    @Test func valuesNestedDeeperThan64AreRefused() {
        let values: [DBusValue] = [
            Self.nested(65, .int32(1)) { .variant($0) },
            Self.nested(32, .variant(Self.nested(32, .byte(1)) { .array($0.type, [$0]) })) { .array($0.type, [$0]) },
            Self.nested(33, .int32(1)) { .dictionary(key: .string, value: $0.type, [.init(key: .string("k"), value: $0)]) },
        ]
        for value in values {
            #expect(value.nestingDepth > DBusValue.maximumTotalDepth)
            let error = #expect(throws: DBusError.self) { try value.validate() }
            #expect(error?.name == .invalidArgs)
        }
    }

    @Test func nestingDepthCountsEveryContainer() {
        #expect(DBusValue.string("a").nestingDepth == 0)
        #expect(DBusValue.array(.string, [.string("a")]).nestingDepth == 1)
        #expect(DBusValue.array(.string, []).nestingDepth == 1)
        #expect(
            DBusValue.dictionary(key: .string, value: .variant, [.init(key: .string("k"), value: .variant(.string("v")))])
                .nestingDepth == 3)
        #expect(DBusValue.structure([.int32(1), .variant(.int32(2))]).nestingDepth == 2)
        #expect(Self.nested(64, .int32(1)) { .variant($0) }.nestingDepth == 64)
    }

    @Test func messagesUsingTheReservedLocalNamesAreRefused() {
        let messages: [DBusMessage] = [
            .signal(path: "/org/freedesktop/DBus/Local", interface: "org.example.X", member: "Y"),
            .signal(path: "/org/example", interface: "org.freedesktop.DBus.Local", member: "Disconnected"),
            .methodCall(destination: nil, path: "/org/freedesktop/DBus/Local", interface: nil, member: "Ping"),
            .methodCall(destination: nil, path: "/a", interface: "org.freedesktop.DBus.Local", member: "Ping"),
        ]
        for message in messages {
            let error = #expect(throws: DBusError.self) { try message.validate() }
            #expect(error?.name == .invalidArgs)
        }
        #expect(throws: Never.self) {
            try DBusMessage.signal(path: "/org/freedesktop/DBus/Locale", interface: "org.freedesktop.DBus.Locale", member: "Y")
                .validate()
        }
    }

    // MARK: - Names

    struct NameCase: Sendable, CustomTestStringConvertible {
        var kind: String
        var text: String
        var valid: Bool
        var testDescription: String {
            let shown = text.count > 24 ? "\(text.prefix(20))… (\(text.utf8.count) bytes)" : text
            return "\(kind) \(valid ? "accepts" : "refuses") '\(shown.unicodeScalars.map { $0 == "\0" ? "\\0" : String($0) }.joined())'"
        }
    }

    /// A dotted name of exactly `bytes` bytes: `a.` followed by `b`s.
    static func dotted(_ bytes: Int, prefix: String = "") -> String {
        prefix + "a." + repeated("b", bytes - 2 - prefix.utf8.count)
    }

    static var nameCases: [NameCase] {
        var cases: [NameCase] = []
        func add(_ kind: String, valid: [String], invalid: [String]) {
            cases += valid.map { NameCase(kind: kind, text: $0, valid: true) }
            cases += invalid.map { NameCase(kind: kind, text: $0, valid: false) }
        }
        add(
            "bus name",
            valid: [
                ":1.42", ":1.2.3", ":a-b.c", ":1.0", "org.freedesktop.DBus", "io.github.settingsbus.Settings1", "a.b", "a-b.c_d",
                "_a.b", "A.B", dotted(255), ":" + dotted(254),
            ],
            invalid: [
                "", "org", ".org.x", "org.x.", "org..x", "1org.x", "org.1x", "org.x y", "org/x.y", ":", ":1", ":.1", ":1..2", "é.x",
                "org.x\0y", "\0", dotted(256), ":" + dotted(255),
            ])
        add(
            "interface name",
            valid: ["org.freedesktop.DBus.Peer", "a.b", "_a._b", "A1.b2", dotted(255)],
            invalid: ["", "a", "a..b", "a.1b", "1a.b", "a-b.c", ":1.2", ".a.b", "a.b.", "a.b\0", dotted(256)])
        add(
            "error name",
            valid: ["org.freedesktop.DBus.Error.Failed", "a.b", "io.github.settingsbus.Settings1.Error.NotWritable", dotted(255)],
            invalid: ["", "Failed", "org..Error", "org.1Error", "org.Error-x", "org.Error\0x", dotted(256)])
        add(
            "member name",
            valid: ["Get", "Set_From_String", "_x", "a1", repeated("m", 255)],
            invalid: ["", "1x", "a.b", "a-b", "a b", "é", "Get\0", repeated("m", 256)])
        add(
            "object path",
            valid: ["/", "/a", "/a/b_c/D1", "/0", "/_", "/" + repeated("a", 1000), "/" + repeated("a/", 200) + "z"],
            invalid: ["", "a", "/a/", "//a", "/a//b", "/a-b", "/a.b", "/a b", "/é", "/a\0", "a/b"])
        return cases
    }

    @Test(arguments: nameCases)
    func validatesNames(_ entry: NameCase) {
        let result: Result<String, DBusError>
        switch entry.kind {
        case "bus name": result = Result { () throws(DBusError) in try BusName(entry.text).rawValue }
        case "interface name": result = Result { () throws(DBusError) in try InterfaceName(entry.text).rawValue }
        case "error name": result = Result { () throws(DBusError) in try ErrorName(entry.text).rawValue }
        case "member name": result = Result { () throws(DBusError) in try MemberName(entry.text).rawValue }
        default: result = Result { () throws(DBusError) in try ObjectPath(entry.text).rawValue }
        }
        switch result {
        case .success(let text):
            #expect(entry.valid)
            #expect(text == entry.text)
        case .failure(let error):
            #expect(!entry.valid, "\(error.message)")
            #expect(error.name == .invalidArgs)
            #expect(error.message.contains(entry.kind))
        }
    }
}
