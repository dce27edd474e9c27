// SPDX-License-Identifier: Apache-2.0

import DBus

/// The tokenizer and recursive-descent parser of GVariant text, after GLib's `gvariant-parser.c`.
///
/// Tokens are what GLib's `token_stream_prepare` makes: a number runs over `[A-Za-z0-9.+-]`, a keyword over
/// `[A-Za-z0-9]` from a lower-case letter, a string to its closing quote, a `@type` to the first space, comma,
/// colon, `>`, `]` or unmatched closing bracket; anything else is one byte. Every container and variant adds
/// one level of nesting (a dictionary two, as in `DBusValue.nestingDepth`), and more than
/// ``maximumDepth`` levels is an error; at most ``maximumAnnotations`` annotations may follow each other. So the
/// recursion is bounded whatever the input, and as every step consumes at least one byte, the work is linear in
/// the input.
struct GVariantSyntaxParser {
    /// The deepest nesting of containers, variants and annotations the parser accepts.
    static let maximumDepth = 64
    /// The most type annotations that may precede one value, as in `int64 int64 5`.
    static let maximumAnnotations = 4

    private let bytes: [UInt8]
    /// Where scanning for the next token starts.
    private var position = 0
    /// The current token, if one has been scanned and not consumed.
    private var current: Range<Int>?

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Parses one value followed by nothing but white space.
    mutating func parseDocument() throws(GVariantTextError) -> GVariantSyntax {
        let value = try parseValue(depth: 0, annotations: 0)
        if let token = peek() {
            throw GVariantTextError(
                .syntax, at: token.lowerBound,
                "expected the end of the text after the value but found \(describe(token))")
        }
        return value
    }

    // MARK: Tokens

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || (0x09...0x0D).contains(byte)
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        isAlpha(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func isAlpha(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    /// Scans the next token if needed and returns its range, or `nil` at the end of the text.
    private mutating func peek() -> Range<Int>? {
        if let current { return current }
        while position < bytes.count, Self.isSpace(bytes[position]) { position += 1 }
        guard position < bytes.count else { return nil }
        let start = position
        var end = start + 1
        let first = bytes[start]
        switch first {
        case UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."), UInt8(ascii: "0")...UInt8(ascii: "9"):
            while end < bytes.count,
                Self.isAlphanumeric(bytes[end]) || bytes[end] == UInt8(ascii: "-") || bytes[end] == UInt8(ascii: "+")
                    || bytes[end] == UInt8(ascii: ".")
            {
                end += 1
            }
        case UInt8(ascii: "b") where start + 1 < bytes.count && Self.isQuote(bytes[start + 1]):
            end = scanQuoted(from: start + 2, quote: bytes[start + 1])
        case UInt8(ascii: "a")...UInt8(ascii: "z"):
            while end < bytes.count, Self.isAlphanumeric(bytes[end]) { end += 1 }
        case UInt8(ascii: "'"), UInt8(ascii: "\""):
            end = scanQuoted(from: start + 1, quote: first)
        case UInt8(ascii: "@"):
            var brackets = 0
            scan: while end < bytes.count {
                switch bytes[end] {
                case UInt8(ascii: ","), UInt8(ascii: ":"), UInt8(ascii: ">"), UInt8(ascii: "]"):
                    break scan
                case let byte where Self.isSpace(byte):
                    break scan
                case UInt8(ascii: "("), UInt8(ascii: "{"):
                    brackets += 1
                case UInt8(ascii: ")"), UInt8(ascii: "}"):
                    if brackets == 0 { break scan }
                    brackets -= 1
                default:
                    break
                }
                end += 1
            }
        default:
            break
        }
        position = end
        current = start..<end
        return current
    }

    private static func isQuote(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "'") || byte == UInt8(ascii: "\"")
    }

    /// Returns the end of a quoted token: just past the closing quote, or the end of the text.
    private func scanQuoted(from start: Int, quote: UInt8) -> Int {
        var index = start
        while index < bytes.count {
            if bytes[index] == quote { return index + 1 }
            if bytes[index] == UInt8(ascii: "\\") { index += 1 }
            index += 1
        }
        return bytes.count
    }

    private mutating func consume() {
        current = nil
    }

    private func text(of token: Range<Int>) -> String {
        String(decoding: bytes[token], as: UTF8.self)
    }

    private func token(_ token: Range<Int>, is literal: StaticString) -> Bool {
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        return bytes[token].elementsEqual(expected)
    }

    /// Describes a token for a message, cut short when long.
    private func describe(_ token: Range<Int>) -> String {
        let shown = text(of: token.lowerBound..<min(token.upperBound, token.lowerBound + 40))
        return "'" + shown + (token.count > 40 ? "…" : "") + "'"
    }

    /// Consumes the token if it is the literal.
    private mutating func consume(_ literal: StaticString) -> Bool {
        guard let token = peek(), self.token(token, is: literal) else { return false }
        consume()
        return true
    }

    /// Consumes the literal or throws, naming what was expected and why.
    private mutating func require(_ literal: StaticString, _ purpose: String) throws(GVariantTextError) {
        guard !consume(literal) else { return }
        if let token = peek() {
            throw GVariantTextError(
                .syntax, at: token.lowerBound, "expected '\(literal)' \(purpose) but found \(describe(token))")
        }
        throw GVariantTextError(.syntax, at: bytes.count, "expected '\(literal)' \(purpose) but the text ended")
    }

    // MARK: Values

    private mutating func parseValue(depth: Int, annotations: Int = 0) throws(GVariantTextError) -> GVariantSyntax {
        guard let token = peek() else {
            throw GVariantTextError(.syntax, at: bytes.count, "expected a value but the text ended")
        }
        let start = token.lowerBound
        guard depth <= Self.maximumDepth else {
            throw GVariantTextError(
                .tooDeep, at: start, "values nest more than \(Self.maximumDepth) levels deep")
        }
        let first = bytes[start]
        switch first {
        case UInt8(ascii: "["):
            return GVariantSyntax(kind: .array(try parseList(close: "]", depth: depth)), offset: start)
        case UInt8(ascii: "("):
            return try parseTuple(at: start, depth: depth)
        case UInt8(ascii: "<"):
            consume()
            let inner = try parseValue(depth: depth + 1)
            try require(">", "to close the variant")
            return GVariantSyntax(kind: .variant(inner), offset: start)
        case UInt8(ascii: "{"):
            return try parseDictionary(at: start, depth: depth)
        default:
            break
        }
        if self.token(token, is: "true") || self.token(token, is: "false") {
            consume()
            return GVariantSyntax(kind: .boolean(first == UInt8(ascii: "t")), offset: start)
        }
        if first == UInt8(ascii: "-") || first == UInt8(ascii: "+") || first == UInt8(ascii: ".")
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first)
            || self.token(token, is: "inf") || self.token(token, is: "nan")
        {
            consume()
            return GVariantSyntax(kind: .number(text(of: token)), offset: start)
        }
        if first == UInt8(ascii: "n") || first == UInt8(ascii: "j") {
            if self.token(token, is: "nothing") || self.token(token, is: "just") {
                throw GVariantTextError(
                    .unsupported, at: start,
                    "'\(text(of: token))' makes a maybe value, and D-Bus has no maybe types; "
                        + "store an empty array or leave the key without a value instead")
            }
            throw GVariantTextError(.syntax, at: start, "unknown keyword \(describe(token))")
        }
        if first == UInt8(ascii: "@")
            || (token.count >= 2 && Self.isAlpha(first) && Self.isAlpha(bytes[start + 1]))
        {
            return try parseAnnotated(token, depth: depth, annotations: annotations)
        }
        if Self.isQuote(first) {
            consume()
            return GVariantSyntax(kind: .string(try GVariantStringUnescaper.string(in: bytes, token: token)), offset: start)
        }
        if first == UInt8(ascii: "b"), token.count >= 2, Self.isQuote(bytes[start + 1]) {
            consume()
            return GVariantSyntax(
                kind: .byteString(try GVariantStringUnescaper.byteString(in: bytes, token: token)), offset: start)
        }
        throw GVariantTextError(.syntax, at: start, "expected a value but found \(describe(token))")
    }

    /// Parses `[` elements `]` or any list of comma-separated values up to a closing token.
    private mutating func parseList(close: StaticString, depth: Int) throws(GVariantTextError) -> [GVariantSyntax] {
        consume()
        var elements: [GVariantSyntax] = []
        while !consume(close) {
            if !elements.isEmpty { try require(",", "or '\(close)' after an array element") }
            elements.append(try parseValue(depth: depth + 1))
        }
        return elements
    }

    private mutating func parseTuple(at start: Int, depth: Int) throws(GVariantTextError) -> GVariantSyntax {
        consume()
        var fields: [GVariantSyntax] = []
        while !consume(")") {
            if fields.count > 1 { try require(",", "or ')' after a tuple field") }
            fields.append(try parseValue(depth: depth + 1))
            if fields.count == 1 { try require(",", "after the first tuple field (a one-field tuple is written (x,))") }
        }
        guard !fields.isEmpty else {
            throw GVariantTextError(
                .unsupported, at: start, "'()' is an empty tuple, and D-Bus has no empty structure; "
                    + "a structure holds at least one field")
        }
        return GVariantSyntax(kind: .tuple(fields), offset: start)
    }

    private mutating func parseDictionary(at start: Int, depth: Int) throws(GVariantTextError) -> GVariantSyntax {
        consume()
        if consume("}") {
            return GVariantSyntax(kind: .dictionary(keys: [], values: []), offset: start)
        }
        let firstKey = try parseValue(depth: depth + 2)
        if consume(",") {
            let value = try parseValue(depth: depth + 2)
            try require("}", "to close the dictionary entry {key, value}")
            return GVariantSyntax(kind: .entry(key: firstKey, value: value), offset: start)
        }
        try require(":", "or ',' after a dictionary key")
        var keys = [firstKey]
        var values = [try parseValue(depth: depth + 2)]
        while !consume("}") {
            try require(",", "or '}' after a dictionary entry")
            keys.append(try parseValue(depth: depth + 2))
            try require(":", "after a dictionary key")
            values.append(try parseValue(depth: depth + 2))
        }
        return GVariantSyntax(kind: .dictionary(keys: keys, values: values), offset: start)
    }

    private mutating func parseAnnotated(
        _ token: Range<Int>, depth: Int, annotations: Int
    ) throws(GVariantTextError) -> GVariantSyntax {
        let start = token.lowerBound
        guard annotations < Self.maximumAnnotations else {
            throw GVariantTextError(
                .syntax, at: start, "more than \(Self.maximumAnnotations) type annotations in a row")
        }
        let type: DBusType
        if bytes[start] == UInt8(ascii: "@") {
            type = try GVariantTypeAnnotation.parse(bytes[(start + 1)..<token.upperBound], at: start + 1)
        } else {
            guard let keywordType = GVariantTypeAnnotation.keywords[text(of: token)] else {
                if self.token(token, is: "handle") {
                    throw GVariantTextError(
                        .unsupported, at: start, "'handle' values are unix file descriptors, which the settings "
                            + "bus does not carry")
                }
                throw GVariantTextError(
                    .syntax, at: start, "unknown keyword \(describe(token)); type keywords are "
                        + GVariantTypeAnnotation.keywordList)
            }
            type = keywordType
        }
        consume()
        let value = try parseValue(depth: depth, annotations: annotations + 1)
        return GVariantSyntax(kind: .annotated(type, value), offset: start)
    }
}
