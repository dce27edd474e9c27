// SPDX-License-Identifier: Apache-2.0

import DBus

/// Helpers for building test values.
enum TestValues {
    /// A signature known to be valid; an invalid one becomes the empty signature and fails the test that uses it.
    static func signature(_ text: String) -> Signature {
        (try? Signature(text)) ?? .empty
    }

    /// Whether two values are identical, comparing doubles by their bits (so NaN equals NaN and -0.0 differs
    /// from 0.0), and every type exactly.
    static func identical(_ lhs: DBusValue, _ rhs: DBusValue) -> Bool {
        switch (lhs, rhs) {
        case (.double(let left), .double(let right)):
            return left.bitPattern == right.bitPattern || (left.isNaN && right.isNaN)
        case (.variant(let left), .variant(let right)):
            return identical(left, right)
        case (.array(let leftType, let left), .array(let rightType, let right)):
            return leftType == rightType && left.count == right.count && zip(left, right).allSatisfy(identical)
        case (.dictionary(let leftKey, let leftValue, let left), .dictionary(let rightKey, let rightValue, let right)):
            return leftKey == rightKey && leftValue == rightValue && left.count == right.count
                && zip(left, right).allSatisfy { identical($0.key, $1.key) && identical($0.value, $1.value) }
        case (.structure(let left), .structure(let right)):
            return left.count == right.count && zip(left, right).allSatisfy(identical)
        default:
            return lhs == rhs
        }
    }
}
