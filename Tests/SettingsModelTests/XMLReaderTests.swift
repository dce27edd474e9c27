// SPDX-License-Identifier: Apache-2.0

import SettingsModel
import Testing

/// The XML reader of GSettings schema sources: what it reads, and the line it names for what it refuses.
struct XMLReaderTests {
    @Test func readsElementsAttributesTextAndReferences() throws {
        let root = try XMLReader.parse(
            """
            \u{FEFF}<?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE schemalist SYSTEM "gschema.dtd" [ <!ENTITY x "]>"> ]>
            <!-- a comment -->
            <schemalist gettext-domain='demo'>
              <key name="a&amp;b" type="s">
                <default>'&lt;x&gt; &quot;&apos; &#65;&#x42;'</default><!-- inside -->
                <summary><![CDATA[a <b> & c]]></summary>
                <?pi inside?>
              </key>
              <empty/>
            </schemalist>
            <!-- after -->
            """)
        #expect(root.name == "schemalist")
        #expect(root.attributes == ["gettext-domain": "demo"])
        #expect(root.line == 4)
        let key = try #require(root.children.first)
        #expect(key.name == "key" && key.line == 5)
        #expect(key.attributes == ["name": "a&b", "type": "s"])
        #expect(key.children.map(\.name) == ["default", "summary"])
        #expect(key.children[0].text == "'<x> \"' AB'")
        #expect(key.children[1].text == "a <b> & c")
        #expect(root.children[1].name == "empty" && root.children[1].line == 10 && root.children[1].content.isEmpty)
    }

    @Test(arguments: [
        ("<a>\n<b>\n</a>", 3, "</a> closes <b>"),
        ("<a>\n\n<b x='1' x='2'/></a>", 3, "given twice"),
        ("<a>\n &nbsp;</a>", 2, "unknown entity '&nbsp;'"),
        ("<a>\n\n &#0;</a>", 3, "not a character"),
        ("<a>\n  <b>", 2, "<b> is not closed"),
        ("<a b=1/>", 1, "not quoted"),
        ("<a b='<'/>", 1, "'<' in the value"),
        ("\n<a/>\n<b/>", 3, "more after the root element"),
        ("text", 1, "text before the first element"),
        ("<!-- open", 1, "a comment ('<!--') is not closed"),
        ("<a>\n<![CDATA[ x", 2, "CDATA section"),
        ("", 1, "holds no element"),
        ("<a>&amp</a>", 1, "'&' starts no entity reference"),
        ("<a\n\n", 1, "start tag <a> is not closed"),
    ])
    func namesTheLineOfWhatItRefuses(_ text: String, _ line: Int, _ message: String) {
        do {
            let root = try XMLReader.parse(text)
            Issue.record("parsed \(root)")
        } catch {
            #expect(error.line == line, "\(error)")
            #expect(error.message.contains(message), "\(error)")
        }
    }

    @Test func deepNestingIsRefusedNotACrash() {
        let depth = XMLReader.maximumDepth + 1
        let text = String(repeating: "<a>", count: depth) + String(repeating: "</a>", count: depth)
        #expect(throws: XMLProblem.self) { try XMLReader.parse(text) }
    }
}
