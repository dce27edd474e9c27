// SPDX-License-Identifier: Apache-2.0

import DBus

/// A small, fast, seeded random number generator (SplitMix64), so generated tests repeat exactly.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// Generates random D-Bus values of random types, bounded in depth and width, favouring edge cases: integer
/// extremes, awkward doubles, strings with quotes, escapes and non-printable characters, empty containers,
/// byte strings.
struct DBusValueGenerator {
    var random: SeededGenerator
    var maximumDepth = 4

    init(seed: UInt64) { random = SeededGenerator(seed: seed) }

    private mutating func chance(_ numerator: Int, in denominator: Int) -> Bool {
        Int.random(in: 0..<denominator, using: &random) < numerator
    }

    private mutating func pick<T>(_ choices: [T]) -> T {
        choices[Int.random(in: 0..<choices.count, using: &random)]
    }

    mutating func type(depth: Int = 0) -> DBusType {
        let basic: [DBusType] = [
            .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath,
            .signature,
        ]
        guard depth < maximumDepth, chance(2, in: 5) else { return chance(1, in: 10) ? .variant : pick(basic) }
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return .array(type(depth: depth + 1))
        case 1: return .dictionary(key: pick(basic), value: type(depth: depth + 1))
        case 2: return .structure((0..<Int.random(in: 1...3, using: &random)).map { _ in type(depth: depth + 1) })
        default: return .variant
        }
    }

    mutating func value(depth: Int = 0) -> DBusValue {
        value(of: type(depth: depth), depth: depth)
    }

    mutating func value(of type: DBusType, depth: Int = 0) -> DBusValue {
        switch type {
        case .byte: return .byte(integer(UInt8.self))
        case .boolean: return .boolean(chance(1, in: 2))
        case .int16: return .int16(integer(Int16.self))
        case .uint16: return .uint16(integer(UInt16.self))
        case .int32: return .int32(integer(Int32.self))
        case .uint32: return .uint32(integer(UInt32.self))
        case .int64: return .int64(integer(Int64.self))
        case .uint64: return .uint64(integer(UInt64.self))
        case .double: return .double(double())
        case .string: return .string(string())
        case .objectPath:
            return .objectPath(pick(["/", "/a", "/a/b_1", "/io/github/settingsbus/Settings1", "/_9/Z"]))
        case .signature:
            return .signature(TestValues.signature(pick(["", "s", "a{sv}", "(ii)", "ay", "aa{s(ib)}", "v"])))
        case .variant:
            return .variant(depth < maximumDepth ? value(depth: depth + 1) : .int32(integer(Int32.self)))
        case .array(let element):
            if element == .byte, chance(1, in: 3) {
                let bytes = (0..<Int.random(in: 0...6, using: &random)).map { _ in UInt8.random(in: 1...255, using: &random) }
                return .array(.byte, (bytes + [0]).map(DBusValue.byte))
            }
            let count = chance(1, in: 4) ? 0 : Int.random(in: 1...4, using: &random)
            return .array(element, (0..<count).map { _ in value(of: element, depth: depth + 1) })
        case .dictionary(let key, let valueType):
            let count = chance(1, in: 4) ? 0 : Int.random(in: 1...3, using: &random)
            return .dictionary(key: key, value: valueType, (0..<count).map { _ in
                DBusDictEntry(key: value(of: key, depth: depth + 2), value: value(of: valueType, depth: depth + 2))
            })
        case .structure(let fields):
            return .structure(fields.map { value(of: $0, depth: depth + 1) })
        }
    }

    private mutating func integer<T: FixedWidthInteger>(_: T.Type) -> T {
        switch Int.random(in: 0..<6, using: &random) {
        case 0: return T.min
        case 1: return T.max
        case 2: return 0
        case 3: return T.random(in: T(0)...T(clamping: 300), using: &random)
        default: return T.random(in: T.min...T.max, using: &random)
        }
    }

    private mutating func double() -> Double {
        let special: [Double] = [
            0, -0.0, 0.1, 0.5, 1, -1, 1e-300, 1e300, 1e16, 1e21, 123.456, -2.5e-8, .leastNonzeroMagnitude, 2.2250738585072014e-308,
            .greatestFiniteMagnitude, -.greatestFiniteMagnitude, .infinity, -.infinity, 9007199254740992,
        ]
        if chance(1, in: 2) { return pick(special) }
        while true {
            let number = Double(bitPattern: random.next())
            if !number.isNaN { return number }
        }
    }

    private mutating func string() -> String {
        let pieces: [String] = [
            "a", "Z", "0", " ", "'", "\"", "\\", "\n", "\t", "\r", "\u{7}", "\u{8}", "\u{B}", "\u{C}", "\u{1}",
            "\u{1F}", "\u{7F}", "\u{80}", "é", "€", "😀", "\u{AD}", "\u{FEFF}", "\u{2028}", "\u{E000}", "\u{378}",
            "\u{E0001}", "\u{10FFFF}", "ü", "日本", "%", "@", "<", ">", "[", "]", "{", "}", ":", ",",
        ]
        return (0..<Int.random(in: 0...8, using: &random)).map { _ in pick(pieces) }.joined()
    }
}
