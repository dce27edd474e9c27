// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

/// GSettings schema sources turned into the broker's schemas (`GSettingsSchemaFile`, `GSettingsSchemas`).
struct GSettingsSchemasTests {
    static let source = """
        <?xml version="1.0" encoding="UTF-8"?>
        <schemalist gettext-domain="demo">
          <enum id="org.example.Mode">
            <value nick="off" value="0"/>
            <value nick="on" value="1"/>
          </enum>
          <flags id="org.example.Parts">
            <value nick="a" value="1"/>
            <value nick="b" value="2"/>
          </flags>
          <schema id="org.example.demo" path="/org/example/demo/">
            <key name="count" type="i">
              <default>5</default>
              <range min="0" max="10"/>
              <summary>Count</summary>
              <description>
                One   two
                three.

                Second paragraph.
              </description>
            </key>
            <key name="mode" enum="org.example.Mode">
              <default>'off'</default>
            </key>
            <key name="parts" flags="org.example.Parts">
              <default>['a']</default>
            </key>
            <key name="colour" type="s">
              <choices>
                <choice value="red"/>
                <choice value="blue"/>
              </choices>
              <default l10n="messages" context="colour">'red'</default>
            </key>
            <key name="maybe-name" type="ms">
              <default>nothing</default>
            </key>
            <key name="maybe-size" type="mu">
              <default>just 4</default>
            </key>
            <key name="bad-default" type="u">
              <default>-1</default>
            </key>
            <key name="bad-type" type="mmi">
              <default>nothing</default>
            </key>
            <key name="no-enum" enum="org.example.Missing">
              <default>'x'</default>
            </key>
            <child name="sub" schema="org.example.sub"/>
          </schema>
          <schema id="org.example.sub">
            <key name="x" type="b">
              <default>false</default>
            </key>
          </schema>
          <schema id="org.example.loose">
            <key name="y" type="b">
              <default>true</default>
            </key>
          </schema>
          <schema id="org.example.derived" path="/org/example/derived/" extends="org.example.demo">
            <override name="count">7</override>
            <key name="extra" type="d">
              <default>1.5</default>
            </key>
          </schema>
          <schema id="org.example.profiles" path="/org/example/legacy/profiles@/">
            <key name="z" type="b">
              <default>true</default>
            </key>
          </schema>
        </schemalist>
        """

    static let overrides = """
        # a vendor's defaults
        [org.example.demo]
        count=3
        [org.example.demo:GNOME]
        count=4
        [org.example.absent]
        k=1
        """

    static func key(_ text: String) -> SettingPath { try! SettingPath(text) }

    static func converted() throws -> GSettingsSchemas {
        let file = try GSettingsSchemaFile(parsing: source)
        return GSettingsSchemas(
            sources: [.init(file: "demo.gschema.xml", folder: 0, content: file)],
            overrides: [.init(file: "10_vendor.gschema.override", folder: 0, text: overrides)])
    }

    @Test func keysBecomeSchemasAtTheirPaths() throws {
        let result = try Self.converted()
        #expect(result.files.count == 1)
        let schemas = try #require(result.files.first?.schemas)
        let count = try #require(schemas[Self.key("/org/example/demo/count")])
        #expect(count.type == .int32)
        #expect(count.defaultValue == .int32(3), "the vendor override file's default")
        #expect(count.range == SettingRange(min: .int32(0), max: .int32(10)))
        #expect(count.summary == "Count")
        #expect(count.description == "One two three.\n\nSecond paragraph.")
        let mode = try #require(schemas[Self.key("/org/example/demo/mode")])
        #expect(mode.type == .string && mode.choices == [.string("off"), .string("on")] && mode.defaultValue == .string("off"))
        let parts = try #require(schemas[Self.key("/org/example/demo/parts")])
        // A set of flags: each element among the nicks.
        #expect(parts.type == .array(.string) && parts.choices == [.string("a"), .string("b")], "\(parts)")
        #expect(parts.defaultValue == .array(.string, [.string("a")]))
        let colour = try #require(schemas[Self.key("/org/example/demo/colour")])
        #expect(colour.choices == [.string("red"), .string("blue")] && colour.defaultValue == .string("red"))
        #expect(schemas[Self.key("/org/example/demo/maybe-name")]?.defaultValue == .array(.string, []))
        #expect(schemas[Self.key("/org/example/demo/maybe-size")]?.defaultValue == .array(.uint32, [.uint32(4)]))
        // A child places a relocatable schema below its parent; what extends a schema has its keys and
        // children, with its own overrides (not the vendor's, which name the other schema).
        #expect(schemas[Self.key("/org/example/demo/sub/x")]?.defaultValue == .boolean(false))
        #expect(schemas[Self.key("/org/example/derived/count")]?.defaultValue == .int32(7))
        #expect(schemas[Self.key("/org/example/derived/extra")]?.defaultValue == .double(1.5))
        #expect(schemas[Self.key("/org/example/derived/sub/x")] != nil)
        #expect(result.relocatable == ["org.example.loose"])
        #expect(result.keyCount == schemas.count)
    }

    @Test func whatCannotBeRepresentedIsSkippedAndNamedByLine() throws {
        let result = try Self.converted()
        let schemas = try #require(result.files.first?.schemas)
        for name in ["bad-default", "bad-type", "no-enum"] {
            #expect(schemas[Self.key("/org/example/demo/\(name)")] == nil)
        }
        let problems = result.problems.map(\.description)
        func line(of text: String) -> Int { Self.source.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains(text) }! + 1 }
        let expected = [
            "demo.gschema.xml: line \(line(of: "<default>-1</default>")): key 'bad-default'",
            "demo.gschema.xml: line \(line(of: "name=\"bad-type\"")): key 'bad-type' of schema 'org.example.demo': type 'mmi'",
            "demo.gschema.xml: line \(line(of: "name=\"no-enum\"")): key 'no-enum' of schema 'org.example.demo': enum 'org.example.Missing'",
            "demo.gschema.xml: line \(line(of: "id=\"org.example.profiles\"")): schema 'org.example.profiles' cannot be at /org/example/legacy/profiles@/",
        ]
        for text in expected {
            // The derived schema has the same keys: each problem may be named twice.
            #expect(problems.contains { $0.hasPrefix(text) }, "\(text) in \(problems)")
        }
        #expect(problems.allSatisfy { !$0.contains("10_vendor") }, "\(problems)")
    }

    @Test(arguments: [
        ("<schemalist>\n<schema path='/a/'/>\n</schemalist>", 2, "<schema> has no 'id' attribute"),
        ("<schemalist>\n<schema id='a'>\n<key name='k' type='b' enum='e'/></schema></schemalist>", 3, "exactly one of"),
        ("<schemalist>\n<bogus/>\n</schemalist>", 2, "<bogus> is not allowed in <schemalist>"),
        ("<schemalist><schema id='a'>\n<key name='k' type='b'>\n<default>true</default><colour/></key></schema></schemalist>", 3, "<colour> is not allowed in <key>"),
        ("<schemas/>", 1, "the root element is <schemas>"),
        ("<schemalist>\n<enum id='e'><value nick='a' value='x'/></enum></schemalist>", 2, "not an integer"),
        ("<schemalist>\n<schema id='a' colour='red'/></schemalist>", 2, "has no attribute 'colour'"),
        ("<schemalist>\n<schema id='a'>\n</schemalist>", 3, "</schemalist> closes <schema>"),
    ])
    func aBrokenSourceIsNamedByLine(_ text: String, _ line: Int, _ message: String) {
        do {
            _ = try GSettingsSchemaFile(parsing: text)
            Issue.record("parsed")
        } catch {
            #expect(error.line == line, "\(error)")
            #expect(error.message.contains(message), "\(error)")
        }
    }

    @Test func theFirstFolderDefinesASchemaIdAndTheFirstFileAKey() throws {
        let first = try GSettingsSchemaFile(parsing: "<schemalist><schema id='a' path='/t/'><key name='k' type='i'><default>1</default></key></schema></schemalist>")
        let second = try GSettingsSchemaFile(parsing: "<schemalist><schema id='a' path='/t/'><key name='k' type='i'><default>2</default></key></schema><schema id='b' path='/t/'><key name='k' type='s'><default>''</default></key></schema></schemalist>")
        let result = GSettingsSchemas(sources: [.init(file: "one", folder: 0, content: first), .init(file: "two", folder: 1, content: second)])
        #expect(result.files.count == 1 && result.files[0].file == "one")
        #expect(result.files[0].schemas[Self.key("/t/k")]?.defaultValue == .int32(1))
        #expect(result.problems.isEmpty, "\(result.problems)")
        // In one folder, a schema id given twice is a problem of the second file.
        let same = GSettingsSchemas(sources: [.init(file: "one", folder: 0, content: first), .init(file: "two", folder: 0, content: second)])
        #expect(same.problems.map(\.file) == ["two"] && same.problems[0].message.contains("defined already"))
    }

    @Test(arguments: [
        ("Whether   toolkits\n   load modules.  ", "Whether toolkits load modules."),
        ("\n  One.\n\n\n  Two\n   lines.\n  \n  Three.\n", "One.\n\nTwo lines.\n\nThree."),
        ("", ""),
    ])
    func summariesAndDescriptionsHaveTheirWhiteSpaceCollapsedAsGLibDoes(_ text: String, _ expected: String) {
        #expect(GSettingsSchemaFile.normalizedWhitespace(text) == expected)
    }

    /// Every source this machine has (`gsettings-desktop-schemas` at least) is read without a crash; the test
    /// prints how many keys are placed and how many relocatable schemas skipped.
    @Test func everyInstalledSourceIsRead() throws {
        let folder = "/usr/share/glib-2.0/schemas"
        let contents = BoundedFile.readFolder(folder) {
            $0.hasSuffix(".gschema.xml") || $0.hasSuffix(".enums.xml") || $0.hasSuffix(".gschema.override")
        }
        let xml = contents.files.filter { $0.path.hasSuffix(".gschema.xml") }
        try #require(
            xml.count > 0, "no \(folder)/*.gschema.xml: install the Debian package gsettings-desktop-schemas (scripts/prerequisites)")
        var sources: [GSettingsSchemas.Source] = []
        var overrides: [GSettingsSchemas.OverrideFile] = []
        var broken: [String] = []
        for (path, text) in contents.files {
            guard case .success(let text) = text else {
                broken.append(path)
                continue
            }
            if path.hasSuffix(".gschema.override") {
                overrides.append(.init(file: path, folder: 0, text: text))
                continue
            }
            do {
                sources.append(.init(file: path, folder: 0, content: try GSettingsSchemaFile(parsing: text)))
            } catch {
                broken.append("\(path): \(error)")
            }
        }
        let result = GSettingsSchemas(sources: sources, overrides: overrides)
        print(
            "\(folder): \(xml.count) schema sources, \(result.keyCount) keys placed, \(result.relocatable.count) "
                + "relocatable schemas skipped, \(result.problems.count) keys or files with problems")
        for problem in result.problems { print("  \(problem)") }
        #expect(broken.isEmpty, "\(broken)")
        #expect(result.keyCount > 0)
    }
}
