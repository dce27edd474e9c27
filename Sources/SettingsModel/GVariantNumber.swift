// SPDX-License-Identifier: Apache-2.0

import DBus

/// Number tokens of GVariant text, read as GLib reads them.
///
/// A token is floating point when it contains `.`, `inf` or `nan`, or contains `e` without starting with `0x`;
/// otherwise it may be any number type. As an integer it is read like C's `strtoull` with base 0 after an
/// optional `-`: `0x1f` is hexadecimal, `017` octal, anything else decimal, and an optional `+` may lead. As a
/// double it is read like `strtod`: decimal or hexadecimal floating point, `inf`, `infinity`, `nan`.
///
/// One deliberate difference: GLib refuses subnormal doubles (such as `5e-324`) as "too big for any type",
/// although it prints them. They are accepted here, so every double that is printed reads back.
enum GVariantNumber {
    /// Whether the token reads as floating point when no type is given.
    static func isFloatingPoint(_ token: String) -> Bool {
        token.contains(".") || (!token.hasPrefix("0x") && token.contains("e"))
            || token.contains("inf") || token.contains("nan")
    }

    /// Reads a number token as a value of a numeric type.
    ///
    /// - Returns: `nil` when the type is not numeric.
    static func value(_ token: String, as type: DBusType, at offset: Int) throws(GVariantTextError) -> DBusValue? {
        if type == .double {
            return .double(try double(token, at: offset))
        }
        let limits: (minimum: Int64, maximum: UInt64, name: String)
        switch type {
        case .byte: limits = (0, UInt64(UInt8.max), "byte")
        case .int16: limits = (Int64(Int16.min), UInt64(Int16.max), "int16")
        case .uint16: limits = (0, UInt64(UInt16.max), "uint16")
        case .int32: limits = (Int64(Int32.min), UInt64(Int32.max), "int32")
        case .uint32: limits = (0, UInt64(UInt32.max), "uint32")
        case .int64: limits = (Int64.min, UInt64(Int64.max), "int64")
        case .uint64: limits = (0, UInt64.max, "uint64")
        default: return nil
        }
        if isFloatingPoint(token) {
            throw GVariantTextError(
                .typeMismatch, at: offset,
                "expected a value of type '\(type)' (\(limits.name)) but found the number \(token), "
                    + "which is not an integer")
        }
        let (negative, magnitude) = try integer(token, at: offset)
        let fits = negative
            ? magnitude <= limits.minimum.magnitude
            : magnitude <= limits.maximum
        guard fits else {
            throw GVariantTextError(
                .outOfRange, at: offset,
                "number \(token) is out of range for type '\(type)' (\(limits.name): \(limits.minimum)…\(limits.maximum))")
        }
        switch type {
        case .byte: return .byte(UInt8(magnitude))
        case .int16: return .int16(negative ? Int16(truncatingIfNeeded: 0 &- magnitude) : Int16(magnitude))
        case .uint16: return .uint16(UInt16(magnitude))
        case .int32: return .int32(negative ? Int32(truncatingIfNeeded: 0 &- magnitude) : Int32(magnitude))
        case .uint32: return .uint32(UInt32(magnitude))
        case .int64: return .int64(negative ? Int64(truncatingIfNeeded: 0 &- magnitude) : Int64(magnitude))
        default: return .uint64(magnitude)
        }
    }

    /// Reads an integer token: its sign and magnitude. `-0` is not negative.
    static func integer(_ token: String, at offset: Int) throws(GVariantTextError) -> (negative: Bool, magnitude: UInt64) {
        let bytes = Array(token.utf8)
        var index = 0
        var negative = false
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "+") { index += 1 }
        guard index < bytes.count else {
            throw GVariantTextError(.syntax, at: offset, "'\(token)' is not a number")
        }
        var radix: UInt64 = 10
        if bytes[index] == UInt8(ascii: "0"), index + 2 < bytes.count,
            bytes[index + 1] == UInt8(ascii: "x") || bytes[index + 1] == UInt8(ascii: "X"),
            hexDigit(bytes[index + 2]) != nil
        {
            radix = 16
            index += 2
        } else if bytes[index] == UInt8(ascii: "0") {
            radix = 8
        }
        var magnitude: UInt64 = 0
        var overflow = false
        while index < bytes.count {
            guard let digit = hexDigit(bytes[index]), UInt64(digit) < radix else {
                let character = Character(Unicode.Scalar(bytes[index]))
                throw GVariantTextError(
                    .syntax, at: offset + index, "invalid character '\(character)' in number \(token)")
            }
            let (shifted, shiftOverflow) = magnitude.multipliedReportingOverflow(by: radix)
            let (sum, addOverflow) = shifted.addingReportingOverflow(UInt64(digit))
            overflow = overflow || shiftOverflow || addOverflow
            magnitude = sum
            index += 1
        }
        guard !overflow else {
            throw GVariantTextError(.outOfRange, at: offset, "integer \(token) is too big for any type")
        }
        return (negative && magnitude != 0, magnitude)
    }

    /// Reads a floating-point token.
    static func double(_ token: String, at offset: Int) throws(GVariantTextError) -> Double {
        guard let number = Double(token) else {
            throw GVariantTextError(.syntax, at: offset, "'\(token)' is not a valid number")
        }
        if number.isInfinite, !token.lowercased().contains("inf") {
            throw GVariantTextError(.outOfRange, at: offset, "number \(token) is too big for any type")
        }
        return number
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
