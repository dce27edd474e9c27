// SPDX-License-Identifier: Apache-2.0

public import DBus

/// The inclusive range of values a numeric key accepts, such as `0…100` for a volume.
///
/// Both bounds have the key's type; ``SettingSchema/validate(for:)`` checks that. Values are compared by their
/// numeric value, exactly, across the integer and double cases.
///
/// ```swift
/// let range = SettingRange(min: .uint32(0), max: .uint32(100))
/// range.contains(.uint32(42))    // true
/// range.contains(.uint32(120))   // false
/// ```
public struct SettingRange: Sendable, Hashable {
    /// The smallest value accepted.
    public var min: DBusValue
    /// The largest value accepted.
    public var max: DBusValue

    /// Makes a range.
    ///
    /// - Parameters:
    ///   - min: The smallest value accepted, of the key's numeric type.
    ///   - max: The largest value accepted, of the same type.
    public init(min: DBusValue, max: DBusValue) {
        self.min = min
        self.max = max
    }

    /// Returns whether a numeric value lies between the bounds, inclusive.
    ///
    /// - Returns: `false` for a value or bound that is not a number, and for NaN.
    public func contains(_ value: DBusValue) -> Bool {
        guard let low = NumericComparison.compare(min, value), let high = NumericComparison.compare(value, max) else {
            return false
        }
        return low <= 0 && high <= 0
    }
}

// MARK: - CustomStringConvertible

extension SettingRange: CustomStringConvertible {
    /// The bounds in GVariant text without annotations, as in `0…100`.
    public var description: String {
        GVariantText.format(min, annotateTypes: false) + "…" + GVariantText.format(max, annotateTypes: false)
    }
}
