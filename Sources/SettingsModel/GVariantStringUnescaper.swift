// SPDX-License-Identifier: Apache-2.0

/// The contents of quoted string and byte string tokens, with GLib's escapes applied.
///
/// Strings (`'…'` or `"…"`) accept `\a \b \f \n \r \t \v`, `\uXXXX` (exactly four hex digits), `\UXXXXXXXX`
/// (exactly eight) and a backslash before a newline, which is dropped; a backslash before any other character
/// stands for that character, so `\\`, `\'` and `\"` are the backslash and the quotes. Byte strings (`b'…'`)
/// accept the same letter escapes and octal escapes of one to three digits (`\0`, `\101`, `\377`) instead of
/// `\u`. As in GLib, a byte string ends at its first NUL, and a NUL is appended, so `b'ab'` is the three bytes
/// `0x61 0x62 0x00`.
enum GVariantStringUnescaper {
    /// Returns the string a quoted token stands for.
    ///
    /// - Parameters:
    ///   - bytes: The whole text.
    ///   - token: The token's range, starting at its opening quote.
    static func string(in bytes: [UInt8], token: Range<Int>) throws(GVariantTextError) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(token.count)
        let quote = bytes[token.lowerBound]
        var index = token.lowerBound + 1
        while true {
            guard index < token.upperBound else { throw unterminated(at: token.lowerBound, quote: quote) }
            let byte = bytes[index]
            if byte == quote { break }
            guard byte == UInt8(ascii: "\\") else {
                output.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < token.upperBound else { throw unterminated(at: token.lowerBound, quote: quote) }
            let escaped = bytes[index]
            if escaped == UInt8(ascii: "u") || escaped == UInt8(ascii: "U") {
                let length = escaped == UInt8(ascii: "u") ? 4 : 8
                let scalar = try unicodeEscape(in: bytes, digitsAt: index + 1, length: length, end: token.upperBound)
                output.append(contentsOf: String(Character(scalar)).utf8)
                index += 1 + length
            } else if let control = letterEscape(escaped) {
                output.append(control)
                index += 1
            } else if escaped == UInt8(ascii: "\n") {
                index += 1
            } else {
                output.append(escaped)
                index += 1
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Returns the bytes a `b'…'` token stands for, truncated at the first NUL, with a NUL appended.
    static func byteString(in bytes: [UInt8], token: Range<Int>) throws(GVariantTextError) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(token.count)
        let quote = bytes[token.lowerBound + 1]
        var index = token.lowerBound + 2
        while true {
            guard index < token.upperBound else { throw unterminated(at: token.lowerBound, quote: quote) }
            let byte = bytes[index]
            if byte == quote { break }
            guard byte == UInt8(ascii: "\\") else {
                output.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < token.upperBound else { throw unterminated(at: token.lowerBound, quote: quote) }
            let escaped = bytes[index]
            if isOctalDigit(escaped) {
                var value = Int(escaped - UInt8(ascii: "0"))
                index += 1
                for _ in 0..<2 where index < token.upperBound && isOctalDigit(bytes[index]) {
                    value = value << 3 | Int(bytes[index] - UInt8(ascii: "0"))
                    index += 1
                }
                output.append(UInt8(truncatingIfNeeded: value))
            } else if let control = letterEscape(escaped) {
                output.append(control)
                index += 1
            } else if escaped == UInt8(ascii: "\n") {
                index += 1
            } else {
                output.append(escaped)
                index += 1
            }
        }
        if let nul = output.firstIndex(of: 0) { output.removeSubrange(nul...) }
        output.append(0)
        return output
    }

    private static func isOctalDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "7")).contains(byte)
    }

    private static func letterEscape(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "a"): return 0x07
        case UInt8(ascii: "b"): return 0x08
        case UInt8(ascii: "f"): return 0x0C
        case UInt8(ascii: "n"): return 0x0A
        case UInt8(ascii: "r"): return 0x0D
        case UInt8(ascii: "t"): return 0x09
        case UInt8(ascii: "v"): return 0x0B
        default: return nil
        }
    }

    private static func unterminated(at offset: Int, quote: UInt8) -> GVariantTextError {
        GVariantTextError(
            .syntax, at: offset,
            "unterminated string constant: the closing \(quote == UInt8(ascii: "'") ? "'" : "\"") is missing")
    }

    /// Reads exactly `length` hex digits and returns the character they name.
    private static func unicodeEscape(
        in bytes: [UInt8], digitsAt start: Int, length: Int, end: Int
    ) throws(GVariantTextError) -> Unicode.Scalar {
        let escape = length == 4 ? "\\u" : "\\U"
        var value: UInt32 = 0
        for index in start..<(start + length) {
            guard index < end, let digit = hexValue(bytes[index]) else {
                throw GVariantTextError(
                    .syntax, at: start - 2,
                    "invalid \(length)-character unicode escape: \(escape) takes exactly \(length) hex digits, "
                        + "as in \(length == 4 ? "\\u00e9" : "\\U0001f600")")
            }
            value = value << 4 | UInt32(digit)
        }
        guard value != 0 else {
            throw GVariantTextError(
                .invalidValue, at: start - 2, "\(escape) escape of NUL: D-Bus strings cannot contain NUL")
        }
        guard let scalar = Unicode.Scalar(value) else {
            throw GVariantTextError(
                .invalidValue, at: start - 2,
                "\(escape) escape of U+\(String(value, radix: 16, uppercase: true)), which is not a Unicode "
                    + "character (a surrogate or beyond U+10FFFF)")
        }
        return scalar
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
