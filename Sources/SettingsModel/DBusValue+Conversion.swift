// SPDX-License-Identifier: Apache-2.0

public import DBus

extension DBusValue {
    /// The value as a value of `type`, when the conversion loses nothing; nil otherwise.
    ///
    /// A value keeps its type when that is `type`. Otherwise the conversions are the widening ones, which no
    /// value can lose anything in: an integer to a wider integer type that holds every value of its own (a
    /// byte to any other integer, `int16` to `int32` or `int64`, `uint16` to `int32`, `uint32`, `int64` or
    /// `uint64`, `int32` to `int64`, `uint32` to `int64` or `uint64`), and an integer to `double` when this
    /// value is exactly a double (every integer up to 2^53 in magnitude is). An array converts element by
    /// element. Nothing else converts: not a narrower integer, not a sign change, not a string to a number.
    ///
    /// ```swift
    /// DBusValue.int32(14).losslesslyConverted(to: .int64)    // .int64(14)
    /// DBusValue.int64(14).losslesslyConverted(to: .int32)    // nil: int64 is wider
    /// DBusValue.int32(3).losslesslyConverted(to: .double)    // .double(3.0)
    /// ```
    public func losslesslyConverted(to type: DBusType) -> DBusValue? {
        if self.type == type { return self }
        if case .array(_, let elements) = self, case .array(let elementType) = type {
            var converted: [DBusValue] = []
            converted.reserveCapacity(elements.count)
            for element in elements {
                guard let value = element.losslesslyConverted(to: elementType) else { return nil }
                converted.append(value)
            }
            return .array(elementType, converted)
        }
        guard let (value, sourceWidth) = integer else { return nil }
        switch type {
        case .double:
            let double = Double(value)
            guard double.magnitude <= 9_007_199_254_740_992, Int64(exactly: double) == value else { return nil }
            return .double(double)
        case .int16 where sourceWidth.fitsIn(bits: 16, signed: true): return .int16(Int16(value))
        case .uint16 where sourceWidth.fitsIn(bits: 16, signed: false): return .uint16(UInt16(value))
        case .int32 where sourceWidth.fitsIn(bits: 32, signed: true): return .int32(Int32(value))
        case .uint32 where sourceWidth.fitsIn(bits: 32, signed: false): return .uint32(UInt32(value))
        case .int64 where sourceWidth.fitsIn(bits: 64, signed: true): return .int64(value)
        case .uint64 where sourceWidth.fitsIn(bits: 64, signed: false): return .uint64(UInt64(value))
        default: return nil
        }
    }

    /// An integer value and its type's width and signedness; nil for other values and for `uint64` (no wider
    /// type holds every `uint64`).
    private var integer: (value: Int64, width: IntegerWidth)? {
        switch self {
        case .byte(let number): (Int64(number), IntegerWidth(bits: 8, signed: false))
        case .int16(let number): (Int64(number), IntegerWidth(bits: 16, signed: true))
        case .uint16(let number): (Int64(number), IntegerWidth(bits: 16, signed: false))
        case .int32(let number): (Int64(number), IntegerWidth(bits: 32, signed: true))
        case .uint32(let number): (Int64(number), IntegerWidth(bits: 32, signed: false))
        case .int64(let number): (number, IntegerWidth(bits: 64, signed: true))
        default: nil
        }
    }
}

/// The width and signedness of an integer type, to tell whether another type holds all of its values.
private struct IntegerWidth {
    var bits: Int
    var signed: Bool

    /// Whether every value of this type is a value of an integer type of `bits` bits.
    func fitsIn(bits target: Int, signed targetSigned: Bool) -> Bool {
        switch (signed, targetSigned) {
        case (false, false): bits <= target
        case (false, true): bits < target
        case (true, true): bits <= target
        case (true, false): false
        }
    }
}
