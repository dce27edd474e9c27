// SPDX-License-Identifier: Apache-2.0

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

import DBus

/// The printer behind ``GVariantText/format(_:annotateTypes:)``: a transcription of GLib's
/// `g_variant_print_string` for the types D-Bus has.
///
/// GLib's rules, kept here exactly so that our output equals what `dconf dump`, `dconf read` and `gsettings get`
/// print:
/// - `int32`, `boolean`, `double` and `string` values are never annotated; every other basic type is, when
///   annotations are on (`byte 0x05`, `int16 5`, `uint32 7`, `objectpath '/a'`, `signature 'as'`).
/// - In an array or dictionary only the first element (the first key and value) is annotated; the rest are
///   inferred from it. Every field of a structure is annotated. An empty array or dictionary is written
///   `@as []` / `@a{sv} {}`.
/// - Inside `<…>` annotations are always on, whatever the caller asked for, since a variant's contents have no
///   other source of type.
/// - An `ay` whose only NUL byte is its last byte is a byte string, `b'…'`, escaped as `g_strescape` does;
///   otherwise it is an array of bytes.
/// - Doubles use `%.17g` and gain `.0` when that shows neither `.`, `e`, `inf` nor `nan`.
/// - Strings use single quotes, or double quotes when they contain `'`; the quote and `\` are escaped, and
///   characters that are not printable (`g_unichar_isprint`: control, format, unassigned, surrogate) become
///   `\a \b \f \n \r \t \v`, `\uXXXX` or `\UXXXXXXXX`.
struct GVariantPrinter {
    private(set) var output = ""

    mutating func print(_ value: DBusValue, annotate: Bool) {
        switch value {
        case .boolean(let flag):
            output += flag ? "true" : "false"
        case .byte(let byte):
            if annotate { output += "byte " }
            output += "0x" + Self.hex(UInt32(byte), width: 2)
        case .int16(let number):
            if annotate { output += "int16 " }
            output += String(number)
        case .uint16(let number):
            if annotate { output += "uint16 " }
            output += String(number)
        case .int32(let number):
            output += String(number)
        case .uint32(let number):
            if annotate { output += "uint32 " }
            output += String(number)
        case .int64(let number):
            if annotate { output += "int64 " }
            output += String(number)
        case .uint64(let number):
            if annotate { output += "uint64 " }
            output += String(number)
        case .double(let number):
            output += Self.format(number)
        case .string(let text):
            printString(text)
        case .objectPath(let path):
            if annotate { output += "objectpath " }
            output += "'" + path.rawValue + "'"
        case .signature(let signature):
            if annotate { output += "signature " }
            output += "'" + signature.text + "'"
        case .variant(let inner):
            output += "<"
            print(inner, annotate: true)
            output += ">"
        case .array(let elementType, let elements):
            if elementType == .byte, let bytes = Self.byteString(elements) {
                printByteString(bytes)
            } else if elements.isEmpty {
                if annotate { output += "@" + value.type.signatureText + " " }
                output += "[]"
            } else {
                output += "["
                var annotateElement = annotate
                for (index, element) in elements.enumerated() {
                    if index > 0 { output += ", " }
                    print(element, annotate: annotateElement)
                    annotateElement = false
                }
                output += "]"
            }
        case .dictionary(_, _, let entries):
            if entries.isEmpty {
                if annotate { output += "@" + value.type.signatureText + " " }
                output += "{}"
            } else {
                output += "{"
                var annotateEntry = annotate
                for (index, entry) in entries.enumerated() {
                    if index > 0 { output += ", " }
                    print(entry.key, annotate: annotateEntry)
                    output += ": "
                    print(entry.value, annotate: annotateEntry)
                    annotateEntry = false
                }
                output += "}"
            }
        case .structure(let fields):
            output += "("
            for (index, field) in fields.enumerated() {
                if index > 0 { output += ", " }
                print(field, annotate: annotate)
            }
            output += fields.count == 1 ? ",)" : ")"
        }
    }

    // MARK: Strings

    private mutating func printString(_ text: String) {
        let quote: Unicode.Scalar = text.utf8.contains(UInt8(ascii: "'")) ? "\"" : "'"
        var result = String.UnicodeScalarView()
        result.append(quote)
        for scalar in text.unicodeScalars {
            if scalar == quote || scalar == "\\" { result.append("\\") }
            if Self.isPrintable(scalar) {
                result.append(scalar)
                continue
            }
            result.append("\\")
            switch scalar {
            case "\u{07}": result.append("a")
            case "\u{08}": result.append("b")
            case "\u{0C}": result.append("f")
            case "\n": result.append("n")
            case "\r": result.append("r")
            case "\t": result.append("t")
            case "\u{0B}": result.append("v")
            default:
                if scalar.value < 0x10000 {
                    result.append(contentsOf: ("u" + Self.hex(scalar.value, width: 4)).unicodeScalars)
                } else {
                    result.append(contentsOf: ("U" + Self.hex(scalar.value, width: 8)).unicodeScalars)
                }
            }
        }
        result.append(quote)
        output += String(result)
    }

    /// GLib's `g_unichar_isprint`: everything but control, format, unassigned and surrogate code points.
    static func isPrintable(_ scalar: Unicode.Scalar) -> Bool {
        // Printable ASCII, the common case, without a lookup in the Unicode tables.
        if scalar.value >= 0x20 && scalar.value < 0x7F { return true }
        switch scalar.properties.generalCategory {
        case .control, .format, .unassigned, .surrogate: return false
        default: return true
        }
    }

    // MARK: Byte strings

    /// The bytes before the terminating NUL when the array is a byte string in GLib's sense: its first NUL byte
    /// is its last byte.
    private static func byteString(_ elements: [DBusValue]) -> [UInt8]? {
        guard case .byte(0)? = elements.last else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(elements.count - 1)
        for element in elements.dropLast() {
            guard case .byte(let byte) = element, byte != 0 else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    /// Prints `b'…'` with the escapes of GLib's `g_strescape`.
    private mutating func printByteString(_ bytes: [UInt8]) {
        let quote = bytes.contains(UInt8(ascii: "'")) ? "\"" : "'"
        var escaped = ""
        for byte in bytes {
            switch byte {
            case 0x08: escaped += "\\b"
            case 0x0C: escaped += "\\f"
            case 0x0A: escaped += "\\n"
            case 0x0D: escaped += "\\r"
            case 0x09: escaped += "\\t"
            case 0x0B: escaped += "\\v"
            case UInt8(ascii: "\\"): escaped += "\\\\"
            case UInt8(ascii: "\""): escaped += "\\\""
            case 0x20..<0x7F: escaped.unicodeScalars.append(Unicode.Scalar(byte))
            default: escaped += "\\" + String(byte >> 6) + String((byte >> 3) & 7) + String(byte & 7)
            }
        }
        output += "b" + quote + escaped + quote
    }

    // MARK: Numbers

    /// Formats a double as GLib does: `%.17g` with a `.` decimal point whatever the C locale, plus `.0` when the
    /// result would otherwise read as an integer.
    static func format(_ number: Double) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBufferPointer { pointer in
            withVaList([number]) { arguments in
                Int(vsnprintf(pointer.baseAddress, pointer.count, "%.17g", arguments))
            }
        }
        let bytes = buffer.prefix(max(0, min(count, buffer.count - 1))).map { UInt8(bitPattern: $0) }
        // Replace a locale's decimal separator (anything between the digit runs) with '.'.
        var text = ""
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            let isNumberByte = (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "e")
                || byte == UInt8(ascii: ".")
            if isNumberByte || !number.isFinite {
                text.unicodeScalars.append(Unicode.Scalar(byte))
                index += 1
            } else {
                text += "."
                while index < bytes.count, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) {
                    index += 1
                }
            }
        }
        if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "n" || $0 == "N" }) {
            text += ".0"
        }
        return text
    }

    static func hex(_ value: UInt32, width: Int) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
