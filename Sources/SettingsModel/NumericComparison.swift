// SPDX-License-Identifier: Apache-2.0

import DBus

/// Exact comparison of numeric D-Bus values of any of the integer and double cases.
///
/// `Int64`, `UInt64` and `Double` values are compared by their mathematical values, without rounding: an
/// `int64` 9007199254740993 is greater than the double 9007199254740992.0. NaN compares with nothing.
enum NumericComparison {
    private enum Number {
        case signed(Int64)
        case unsigned(UInt64)
        case floating(Double)
    }

    private static func number(_ value: DBusValue) -> Number? {
        switch value {
        case .byte(let number): return .unsigned(UInt64(number))
        case .int16(let number): return .signed(Int64(number))
        case .uint16(let number): return .unsigned(UInt64(number))
        case .int32(let number): return .signed(Int64(number))
        case .uint32(let number): return .unsigned(UInt64(number))
        case .int64(let number): return .signed(number)
        case .uint64(let number): return .unsigned(number)
        case .double(let number): return .floating(number)
        default: return nil
        }
    }

    /// Whether a value is of one of the numeric cases.
    static func isNumeric(_ value: DBusValue) -> Bool { number(value) != nil }

    /// Whether a type is one of the numeric types (`y n q i u x t d`).
    static func isNumeric(_ type: DBusType) -> Bool {
        switch type {
        case .byte, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double: return true
        default: return false
        }
    }

    /// Compares two numeric values: negative when `lhs < rhs`, zero when equal, positive when greater.
    ///
    /// - Returns: `nil` when either value is not numeric or is NaN.
    static func compare(_ lhs: DBusValue, _ rhs: DBusValue) -> Int? {
        guard let left = number(lhs), let right = number(rhs) else { return nil }
        return compare(left, right)
    }

    private static func compare(_ lhs: Number, _ rhs: Number) -> Int? {
        switch (lhs, rhs) {
        case (.signed(let left), .signed(let right)): return order(left, right)
        case (.unsigned(let left), .unsigned(let right)): return order(left, right)
        case (.floating(let left), .floating(let right)):
            guard !left.isNaN, !right.isNaN else { return nil }
            return left < right ? -1 : (left > right ? 1 : 0)
        case (.signed(let left), .unsigned(let right)):
            return left < 0 ? -1 : order(UInt64(left), right)
        case (.unsigned, .signed):
            return compare(rhs, lhs).map { -$0 }
        case (.signed(let left), .floating(let right)):
            return compareInteger(negative: left < 0, magnitude: left.magnitude, with: right)
        case (.unsigned(let left), .floating(let right)):
            return compareInteger(negative: false, magnitude: left, with: right)
        case (.floating, _):
            return compare(rhs, lhs).map { -$0 }
        }
    }

    private static func order<T: Comparable>(_ lhs: T, _ rhs: T) -> Int {
        lhs < rhs ? -1 : (lhs > rhs ? 1 : 0)
    }

    /// Compares the integer `±magnitude` with a double, exactly.
    private static func compareInteger(negative: Bool, magnitude: UInt64, with double: Double) -> Int? {
        guard !double.isNaN else { return nil }
        let doubleNegative = double < 0
        if negative != doubleNegative {
            if magnitude == 0 && double == 0 { return 0 }
            return negative ? -1 : 1
        }
        // Same sign: compare magnitudes, then flip for negatives.
        let doubleMagnitude = double.magnitude
        let result: Int
        if doubleMagnitude >= 18_446_744_073_709_551_616.0 {
            result = -1
        } else {
            let whole = UInt64(doubleMagnitude.rounded(.down))
            if magnitude != whole {
                result = magnitude < whole ? -1 : 1
            } else {
                result = doubleMagnitude > doubleMagnitude.rounded(.down) ? -1 : 0
            }
        }
        return negative ? -result : result
    }
}
