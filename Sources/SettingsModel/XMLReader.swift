// SPDX-License-Identifier: Apache-2.0

/// An element of an XML document, with its attributes, its content and the line it starts on.
package struct XMLElement: Sendable, Hashable {
    /// The element's name, such as `key`.
    package var name: String
    /// The attributes, by name, their entity references replaced.
    package var attributes: [String: String]
    /// The elements and text inside, in document order (comments and processing instructions left out).
    package var content: [XMLContent]
    /// The line the element's start tag is on, counted from 1.
    package var line: Int

    /// The elements inside, in document order.
    package var children: [XMLElement] {
        content.compactMap { if case .element(let element) = $0 { element } else { nil } }
    }

    /// The text inside, the pieces between the elements joined (entity references replaced, CDATA as written).
    package var text: String {
        content.reduce(into: "") { if case .text(let text) = $1 { $0 += text } }
    }
}

/// What an element holds: another element, or text.
package enum XMLContent: Sendable, Hashable {
    case element(XMLElement)
    case text(String)
}

/// What is wrong with an XML document, and on which line.
package struct XMLProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// The line, counted from 1.
    package var line: Int
    /// What is wrong, for people.
    package var message: String

    package init(line: Int, _ message: String) {
        self.line = line
        self.message = message
    }

    /// `line N: message`.
    package var description: String { "line \(line): \(message)" }
}

/// A small XML reader for the files the broker reads (GSettings schema sources): elements, attributes, text,
/// comments, CDATA sections, processing instructions and the `<?xml?>` declaration (skipped), a `DOCTYPE`
/// (skipped, internal subset included, its declarations not applied), and the five predefined entities and
/// numeric character references. Namespaces are not interpreted (a prefixed name is a name with a colon), and
/// no other entity is known: a reference to one is an error.
///
/// Any input either parses or throws: elements nest at most ``maximumDepth`` levels, and the work is linear in
/// the text.
package enum XMLReader {
    /// The most levels elements nest.
    package static let maximumDepth = 64

    /// Reads a document and returns its root element.
    ///
    /// - Throws: ``XMLProblem`` with the line of the first problem found.
    package static func parse(_ text: String) throws(XMLProblem) -> XMLElement {
        var scanner = Scanner(bytes: Array(text.utf8))
        return try scanner.document()
    }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0
        var line = 1

        init(bytes: [UInt8]) {
            self.bytes = bytes
            // A byte-order mark is not part of the text.
            if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        }

        var atEnd: Bool { index >= bytes.count }

        func peek(_ literal: String) -> Bool {
            var at = index
            for byte in literal.utf8 {
                guard at < bytes.count, bytes[at] == byte else { return false }
                at += 1
            }
            return true
        }

        mutating func advance(_ count: Int = 1) {
            for _ in 0..<count where index < bytes.count {
                if bytes[index] == UInt8(ascii: "\n") { line += 1 }
                index += 1
            }
        }

        mutating func skipSpace() {
            while !atEnd, Self.isSpace(bytes[index]) { advance() }
        }

        static func isSpace(_ byte: UInt8) -> Bool {
            byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
        }

        /// Skips past the next `terminator`, or throws naming what was left open and where.
        mutating func skip(past terminator: String, what: String) throws(XMLProblem) {
            let start = line
            while !atEnd {
                if peek(terminator) {
                    advance(terminator.utf8.count)
                    return
                }
                advance()
            }
            throw XMLProblem(line: start, "\(what) is not closed with '\(terminator)' before the end of the file")
        }

        /// Skips comments, processing instructions and white space; with `doctype`, a DOCTYPE too.
        mutating func skipMisc(doctype: Bool) throws(XMLProblem) {
            while true {
                skipSpace()
                if peek("<!--") {
                    try comment()
                } else if peek("<?") {
                    try skip(past: "?>", what: "a processing instruction ('<?')")
                } else if doctype, peek("<!DOCTYPE") {
                    try skipDoctype()
                } else {
                    return
                }
            }
        }

        mutating func comment() throws(XMLProblem) {
            advance(4)
            try skip(past: "-->", what: "a comment ('<!--')")
        }

        /// Skips `<!DOCTYPE …>`, with an internal subset in brackets (its quoted strings and comments may hold
        /// `]` and `>`).
        mutating func skipDoctype() throws(XMLProblem) {
            let start = line
            advance(9)
            var depth = 0
            while !atEnd {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                    advance()
                    try skip(past: String(UnicodeScalar(byte)), what: "a quoted string in the DOCTYPE")
                    continue
                }
                if peek("<!--") {
                    try comment()
                    continue
                }
                if byte == UInt8(ascii: "[") { depth += 1 }
                if byte == UInt8(ascii: "]") { depth -= 1 }
                advance()
                if byte == UInt8(ascii: ">"), depth <= 0 { return }
            }
            throw XMLProblem(line: start, "the DOCTYPE is not closed with '>' before the end of the file")
        }

        mutating func document() throws(XMLProblem) -> XMLElement {
            try skipMisc(doctype: true)
            guard !atEnd else { throw XMLProblem(line: line, "the file holds no element") }
            guard bytes[index] == UInt8(ascii: "<") else {
                throw XMLProblem(line: line, "text before the first element: '\(excerpt())'")
            }
            let root = try element(depth: 1)
            try skipMisc(doctype: false)
            guard atEnd else {
                throw XMLProblem(line: line, "more after the root element <\(root.name)> ends: '\(excerpt())'")
            }
            return root
        }

        /// What follows, as a problem quotes it: the rest of the line, short.
        func excerpt() -> String {
            let end = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            return LineText.excerpt(String(decoding: bytes[index..<min(end, index + 60)], as: UTF8.self), limit: 40)
        }

        static func isNameByte(_ byte: UInt8, first: Bool) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "_"),
                UInt8(ascii: ":"), 0x80...0xFF:
                return true
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."):
                return !first
            default:
                return false
            }
        }

        mutating func name(of what: String) throws(XMLProblem) -> String {
            let start = index
            while !atEnd, Self.isNameByte(bytes[index], first: index == start) { advance() }
            guard index > start else {
                throw XMLProblem(line: line, "expected \(what), found '\(atEnd ? "the end of the file" : excerpt())'")
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        /// Reads an element, at `<`.
        mutating func element(depth: Int) throws(XMLProblem) -> XMLElement {
            let start = line
            guard depth <= XMLReader.maximumDepth else {
                throw XMLProblem(line: line, "elements nest more than \(XMLReader.maximumDepth) levels deep")
            }
            advance()
            var element = XMLElement(name: try name(of: "an element name after '<'"), attributes: [:], content: [], line: start)
            // Attributes, up to '>' or '/>'.
            while true {
                let hadSpace = !atEnd && Self.isSpace(bytes[index])
                skipSpace()
                if atEnd {
                    throw XMLProblem(line: start, "the start tag <\(element.name)> is not closed before the end of the file")
                }
                if peek("/>") {
                    advance(2)
                    return element
                }
                if bytes[index] == UInt8(ascii: ">") {
                    advance()
                    break
                }
                guard hadSpace else {
                    throw XMLProblem(line: line, "expected white space, '>' or '/>' in <\(element.name)>, found '\(excerpt())'")
                }
                let attribute = try name(of: "an attribute name in <\(element.name)>")
                skipSpace()
                guard peek("=") else {
                    throw XMLProblem(line: line, "attribute '\(attribute)' of <\(element.name)> has no '=' and value")
                }
                advance()
                skipSpace()
                let value = try attributeValue(attribute, of: element.name)
                guard element.attributes.updateValue(value, forKey: attribute) == nil else {
                    throw XMLProblem(line: line, "attribute '\(attribute)' is given twice in <\(element.name)>")
                }
            }
            // Content, up to the end tag.
            var text: [UInt8] = []
            func flush() {
                if !text.isEmpty { element.content.append(.text(String(decoding: text, as: UTF8.self))) }
                text.removeAll()
            }
            while true {
                guard !atEnd else {
                    throw XMLProblem(
                        line: start, "<\(element.name)> is not closed: the file ends before its </\(element.name)>")
                }
                if peek("</") {
                    let closing = line
                    advance(2)
                    let name = try name(of: "an element name after '</'")
                    skipSpace()
                    guard peek(">") else {
                        throw XMLProblem(line: line, "expected '>' after '</\(name)', found '\(excerpt())'")
                    }
                    advance()
                    guard name == element.name else {
                        throw XMLProblem(
                            line: closing,
                            "</\(name)> closes <\(element.name)> (opened on line \(start)); expected </\(element.name)>")
                    }
                    flush()
                    return element
                } else if peek("<!--") {
                    try comment()
                } else if peek("<![CDATA[") {
                    advance(9)
                    let from = index, opened = line
                    while !atEnd, !peek("]]>") { advance() }
                    guard !atEnd else {
                        throw XMLProblem(line: opened, "a CDATA section ('<![CDATA[') is not closed with ']]>'")
                    }
                    text += bytes[from..<index]
                    advance(3)
                } else if peek("<?") {
                    try skip(past: "?>", what: "a processing instruction ('<?')")
                } else if peek("<!") {
                    throw XMLProblem(line: line, "unexpected '\(excerpt())' inside <\(element.name)>")
                } else if bytes[index] == UInt8(ascii: "<") {
                    flush()
                    element.content.append(.element(try self.element(depth: depth + 1)))
                } else if bytes[index] == UInt8(ascii: "&") {
                    text += try reference()
                } else {
                    text.append(bytes[index])
                    advance()
                }
            }
        }

        /// Reads a quoted attribute value, at its quote.
        mutating func attributeValue(_ attribute: String, of element: String) throws(XMLProblem) -> String {
            guard !atEnd, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else {
                throw XMLProblem(line: line, "the value of attribute '\(attribute)' of <\(element)> is not quoted")
            }
            let quote = bytes[index], start = line
            advance()
            var value: [UInt8] = []
            while true {
                guard !atEnd else {
                    throw XMLProblem(line: start, "the value of attribute '\(attribute)' of <\(element)> is not closed")
                }
                let byte = bytes[index]
                if byte == quote {
                    advance()
                    return String(decoding: value, as: UTF8.self)
                }
                if byte == UInt8(ascii: "<") {
                    throw XMLProblem(line: line, "'<' in the value of attribute '\(attribute)' of <\(element)>; write &lt;")
                }
                if byte == UInt8(ascii: "&") {
                    value += try reference()
                } else {
                    // White space in an attribute value is normalized to spaces, as XML says.
                    value.append(byte == 0x09 || byte == 0x0A || byte == 0x0D ? 0x20 : byte)
                    advance()
                }
            }
        }

        /// Reads an entity or character reference, at `&`, and returns the text it stands for.
        mutating func reference() throws(XMLProblem) -> [UInt8] {
            let start = index, startLine = line
            advance()
            while !atEnd, bytes[index] != UInt8(ascii: ";"), index - start < 12 { advance() }
            guard !atEnd, bytes[index] == UInt8(ascii: ";") else {
                (index, line) = (start, startLine)
                throw XMLProblem(line: line, "'&' starts no entity reference ('&amp;', '&lt;', …): '\(excerpt())'")
            }
            let name = String(decoding: bytes[(start + 1)..<index], as: UTF8.self)
            advance()
            switch name {
            case "lt": return Array("<".utf8)
            case "gt": return Array(">".utf8)
            case "amp": return Array("&".utf8)
            case "quot": return Array("\"".utf8)
            case "apos": return Array("'".utf8)
            default:
                break
            }
            var number: UInt32?
            if name.hasPrefix("#x") {
                number = UInt32(name.dropFirst(2), radix: 16)
            } else if name.hasPrefix("#") {
                number = UInt32(name.dropFirst(), radix: 10)
            } else {
                throw XMLProblem(
                    line: line,
                    "unknown entity '&\(LineText.excerpt(name, limit: 12));': only &lt; &gt; &amp; &quot; &apos; and "
                        + "character references (&#…;) are known")
            }
            guard let number, number != 0, let scalar = UnicodeScalar(number) else {
                throw XMLProblem(line: line, "'&\(LineText.excerpt(name, limit: 12));' is not a character XML allows")
            }
            return Array(String(Character(scalar)).utf8)
        }
    }
}
