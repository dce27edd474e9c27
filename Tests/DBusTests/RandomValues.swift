// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBusTesting

/// A seeded generator of random D-Bus types and values, so a failing case can be replayed from its seed.
struct RandomValues {
    /// SplitMix64: small, fast and good enough to spread test cases.
    typealias Generator = SeededGenerator

    var generator: Generator

    init(seed: UInt64) { generator = Generator(state: seed) }

    static let basicTypes: [DBusType] = [
        .byte, .boolean, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double, .string, .objectPath, .signature,
    ]

    /// A random complete type whose containers nest at most `depth` deep.
    mutating func type(depth: Int) -> DBusType {
        let choice = depth > 0 ? Int.random(in: 0..<18, using: &generator) : Int.random(in: 0..<12, using: &generator)
        switch choice {
        case 0..<12: return Self.basicTypes[choice]
        case 12, 13: return .array(type(depth: depth - 1))
        case 14: return .dictionary(key: Self.basicTypes.randomElement(using: &generator)!, value: type(depth: depth - 2))
        case 15, 16: return .structure((0..<Int.random(in: 1...4, using: &generator)).map { _ in type(depth: depth - 1) })
        default: return .variant
        }
    }

    /// A random value of `type`; variants hold values of random types within the remaining depth.
    mutating func value(of type: DBusType, depth: Int) -> DBusValue {
        switch type {
        case .byte: return .byte(.random(in: .min ... .max, using: &generator))
        case .boolean: return .boolean(.random(using: &generator))
        case .int16: return .int16(edgy(Int16.self))
        case .uint16: return .uint16(edgy(UInt16.self))
        case .int32: return .int32(edgy(Int32.self))
        case .uint32: return .uint32(edgy(UInt32.self))
        case .int64: return .int64(edgy(Int64.self))
        case .uint64: return .uint64(edgy(UInt64.self))
        case .double:
            let specials: [Double] = [0, -0.0, 1, -1, .greatestFiniteMagnitude, .leastNonzeroMagnitude, .pi, .infinity, -.infinity]
            if Bool.random(using: &generator) { return .double(specials.randomElement(using: &generator)!) }
            let bits = Double(bitPattern: generator.next())
            return .double(bits.isNaN ? 0.5 : bits)
        case .string: return .string(string())
        case .objectPath: return .objectPath(objectPath())
        case .signature:
            let count = Int.random(in: 0...3, using: &generator)
            return .signature(Signature(types: (0..<count).map { _ in self.type(depth: 3) }))
        case .variant:
            let inner = self.type(depth: max(0, depth - 1))
            return .variant(value(of: inner, depth: max(0, depth - 1)))
        case .array(let element):
            let count = Int.random(in: 0...3, using: &generator)
            return .array(element, (0..<count).map { _ in value(of: element, depth: depth - 1) })
        case .dictionary(let key, let valueType):
            let count = Int.random(in: 0...3, using: &generator)
            return .dictionary(
                key: key, value: valueType,
                (0..<count).map { _ in
                    DBusDictEntry(key: value(of: key, depth: 0), value: value(of: valueType, depth: depth - 2))
                })
        case .structure(let fields):
            return .structure(fields.map { value(of: $0, depth: depth - 1) })
        }
    }

    /// A random value of a random type.
    mutating func value(depth: Int) -> DBusValue {
        value(of: type(depth: depth), depth: depth)
    }

    private mutating func edgy<T: FixedWidthInteger>(_: T.Type) -> T {
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: return .min
        case 1: return .max
        default: return .random(in: .min ... .max, using: &generator)
        }
    }

    private mutating func string() -> String {
        let alphabet: [String] = ["a", "Z", "0", " ", "'", "\"", "\\", "\n", "\t", "\u{1}", "é", "✓", "🎉", "中", "\u{FFFD}", "/", "{"]
        let count = Int.random(in: 0...12, using: &generator)
        return (0..<count).map { _ in alphabet.randomElement(using: &generator)! }.joined()
    }

    private mutating func objectPath() -> ObjectPath {
        let count = Int.random(in: 0...4, using: &generator)
        guard count > 0 else { return "/" }
        let elements = (0..<count).map { _ in
            String((0..<Int.random(in: 1...6, using: &generator)).map { _ in "aZ09_".randomElement(using: &generator)! })
        }
        return try! ObjectPath("/" + elements.joined(separator: "/"))
    }
}
