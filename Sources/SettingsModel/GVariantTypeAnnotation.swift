// SPDX-License-Identifier: Apache-2.0

import DBus

/// The type annotations of GVariant text: the keywords (`int64 5`, `objectpath '/a'`) and `@type` declarations
/// (`@as []`, `@a{sv} {}`).
///
/// `@` takes a GVariant type string. GVariant types that D-Bus does not have are refused with a message naming
/// the feature: maybe types (`m`), the unit type `()`, handles (`h`), a dictionary entry outside an array
/// (`{sv}`), and the indefinite types (`*`, `?`, `r`), which GLib refuses in annotations too.
enum GVariantTypeAnnotation {
    /// The type keywords GLib accepts, except `handle`.
    static let keywords: [String: DBusType] = [
        "boolean": .boolean, "byte": .byte, "int16": .int16, "uint16": .uint16, "int32": .int32,
        "uint32": .uint32, "int64": .int64, "uint64": .uint64, "double": .double, "string": .string,
        "objectpath": .objectPath, "signature": .signature,
    ]

    /// The keywords, for messages.
    static let keywordList =
        "boolean, byte, int16, uint16, int32, uint32, int64, uint64, double, string, objectpath and signature"

    /// The deepest type an annotation may spell.
    static let maximumDepth = 64

    /// Parses the type string of an `@` annotation.
    ///
    /// - Parameters:
    ///   - text: The bytes after `@`.
    ///   - offset: The offset of the first of them in the whole text, for messages.
    static func parse(_ text: ArraySlice<UInt8>, at offset: Int) throws(GVariantTextError) -> DBusType {
        guard !text.isEmpty else {
            throw GVariantTextError(.syntax, at: offset, "'@' must be followed by a type, as in @as []")
        }
        var index = text.startIndex
        let type = try parseType(text, &index, depth: 0, base: offset)
        guard index == text.endIndex else {
            throw GVariantTextError(
                .syntax, at: offset + (index - text.startIndex),
                "'@\(String(decoding: text, as: UTF8.self))' holds more than one complete type")
        }
        return type
    }

    private static func parseType(
        _ text: ArraySlice<UInt8>, _ index: inout Int, depth: Int, base: Int
    ) throws(GVariantTextError) -> DBusType {
        let here = base + (index - text.startIndex)
        let whole = "'@" + String(decoding: text, as: UTF8.self) + "'"
        guard depth <= maximumDepth else {
            throw GVariantTextError(.tooDeep, at: here, "the type \(whole) nests more than \(maximumDepth) levels")
        }
        guard index < text.endIndex else {
            throw GVariantTextError(.syntax, at: here, "the type \(whole) ends where a complete type was expected")
        }
        let code = text[index]
        index += 1
        if let basic = DBusType(basicCode: code) { return basic }
        switch code {
        case UInt8(ascii: "v"): return .variant
        case UInt8(ascii: "a"):
            if index < text.endIndex, text[index] == UInt8(ascii: "{") {
                index += 1
                let key = try parseType(text, &index, depth: depth + 1, base: base)
                guard key.isBasic else {
                    throw GVariantTextError(
                        .syntax, at: here, "in \(whole), a dictionary key must have a basic type, not '\(key)'")
                }
                let value = try parseType(text, &index, depth: depth + 1, base: base)
                guard index < text.endIndex, text[index] == UInt8(ascii: "}") else {
                    throw GVariantTextError(
                        .syntax, at: here, "in \(whole), a dictionary entry type holds one key type and one "
                            + "value type, then '}'")
                }
                index += 1
                return .dictionary(key: key, value: value)
            }
            return .array(try parseType(text, &index, depth: depth + 1, base: base))
        case UInt8(ascii: "("):
            var fields: [DBusType] = []
            while index < text.endIndex, text[index] != UInt8(ascii: ")") {
                fields.append(try parseType(text, &index, depth: depth + 1, base: base))
            }
            guard index < text.endIndex else {
                throw GVariantTextError(.syntax, at: here, "in \(whole), '(' has no matching ')'")
            }
            index += 1
            guard !fields.isEmpty else {
                throw GVariantTextError(
                    .unsupported, at: here, "in \(whole), '()' is the empty tuple type, and D-Bus has no empty "
                        + "structure")
            }
            return .structure(fields)
        case UInt8(ascii: "m"):
            throw GVariantTextError(
                .unsupported, at: here, "in \(whole), 'm' makes a maybe type, and D-Bus has no maybe types")
        case UInt8(ascii: "h"):
            throw GVariantTextError(
                .unsupported, at: here, "in \(whole), 'h' is a unix file descriptor, which the settings bus "
                    + "does not carry")
        case UInt8(ascii: "{"):
            throw GVariantTextError(
                .unsupported, at: here, "in \(whole), a dictionary entry type '{…}' may only follow 'a' "
                    + "(as in a{sv}); D-Bus has no dictionary entries outside arrays")
        case UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "r"):
            throw GVariantTextError(
                .syntax, at: here, "in \(whole), '\(Character(Unicode.Scalar(code)))' is an indefinite type; "
                    + "type annotations must be definite")
        default:
            let shown = code < 0x80 ? String(Character(Unicode.Scalar(code))) : "byte 0x" + String(code, radix: 16)
            throw GVariantTextError(.syntax, at: here, "in \(whole), '\(shown)' is not a type code")
        }
    }
}
