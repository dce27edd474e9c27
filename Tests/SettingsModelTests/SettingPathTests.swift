// SPDX-License-Identifier: Apache-2.0

import SettingsModel
import Testing

struct SettingPathTests {
    @Test(arguments: [
        "/a", "/org/example/editor/theme", "/org/example/font-size", "/a/b.c_d-E9", "/0", "/a.b/c",
        "/org/gnome/terminal/legacy/profiles:/:b1dcc9dd-5262-4d8d-a863-c897e6d979b9/font",
        "/" + String(repeating: "x", count: 1023),
    ])
    func acceptsValidKeys(_ text: String) throws {
        let key = try SettingPath(text)
        #expect(key.rawValue == text)
        #expect(SettingPath.isValidKey(text))
        #expect(!SettingDirectory.isValidDirectory(text))
    }

    @Test(arguments: [
        ("", "empty"),
        ("a/b", "must start with '/'"),
        ("/", "root directory"),
        ("/a/", "must not end with '/'"),
        ("/a//b", "empty segment at byte 3"),
        ("//a", "empty segment at byte 1"),
        ("/a b", "character ' ' at byte 2"),
        ("/é", "character 'é' at byte 1"),
        ("/a/b@c", "character '@' at byte 4"),
        ("/a\nb", "U+000A"),
        ("/a\u{0}b", "U+0000"),
        ("/" + String(repeating: "x", count: 1024), "1025 bytes long"),
    ])
    func rejectsInvalidKeys(_ text: String, _ reason: String) {
        #expect(!SettingPath.isValidKey(text))
        let error = #expect(throws: SettingsError.self) { try SettingPath(text) }
        #expect(error?.code == .invalidKey)
        #expect(error?.message.contains(reason) == true, "\(error?.message ?? "")")
        #expect(error?.message.hasPrefix("invalid key '") == true)
    }

    @Test(arguments: ["/", "/org/", "/org/example/editor/", "/a.b/c-d/"])
    func acceptsValidDirectories(_ text: String) throws {
        let directory = try SettingDirectory(text)
        #expect(directory.rawValue == text)
        #expect(SettingDirectory.isValidDirectory(text))
        #expect(!SettingPath.isValidKey(text))
    }

    @Test(arguments: ["", "org/", "/org", "/org//", "//", "/a b/"])
    func rejectsInvalidDirectories(_ text: String) {
        #expect(!SettingDirectory.isValidDirectory(text))
        #expect(throws: SettingsError.invalidKey("")) { try SettingDirectory(text) }
    }

    @Test func keyKnowsItsParentNameAndSegments() throws {
        let key = try SettingPath("/org/example/editor/theme")
        #expect(key.parent == (try SettingDirectory("/org/example/editor/")))
        #expect(key.name == "theme")
        #expect(key.segments == ["org", "example", "editor", "theme"])
        #expect(try SettingPath("/theme").parent == .root)
    }

    @Test func directoryKnowsItsParentAndSegments() throws {
        let directory = try SettingDirectory("/org/example/")
        #expect(directory.parent == (try SettingDirectory("/org/")))
        #expect(directory.parent?.parent == .root)
        #expect(SettingDirectory.root.parent == nil)
        #expect(directory.segments == ["org", "example"])
        #expect(SettingDirectory.root.segments.isEmpty)
        #expect(try directory.key(named: "theme") == SettingPath("/org/example/theme"))
        #expect(try directory.subdirectory(named: "editor") == SettingDirectory("/org/example/editor/"))
        #expect(throws: SettingsError.invalidKey("")) { try directory.key(named: "a/b") }
        #expect(throws: SettingsError.invalidKey("")) { try directory.subdirectory(named: "") }
    }

    @Test func directoryContainsKeysAndDirectoriesBelowIt() throws {
        let directory = try SettingDirectory("/org/example/")
        #expect(directory.contains(try SettingPath("/org/example/theme")))
        #expect(directory.contains(try SettingPath("/org/example/editor/theme")))
        #expect(!directory.contains(try SettingPath("/org/examples/theme")))
        #expect(!directory.contains(try SettingPath("/org/theme")))
        #expect(directory.contains(directory))
        #expect(directory.contains(try SettingDirectory("/org/example/editor/")))
        #expect(!directory.contains(try SettingDirectory("/org/")))
        #expect(SettingDirectory.root.contains(try SettingPath("/x")))
    }

    @Test(arguments: [
        (["/a/b/c"], "/a/b/"),
        (["/a/b/c", "/a/b/d"], "/a/b/"),
        (["/a/b/c", "/a/bc/d"], "/a/"),
        (["/a/bc", "/a/bd"], "/a/"),
        (["/a", "/b"], "/"),
        (["/org/example/x", "/org/example/y/z", "/org/example/y/w"], "/org/example/"),
        (["/same", "/same"], "/"),
    ])
    func findsTheCommonDirectory(_ keys: [String], _ expected: String) throws {
        let paths = try keys.map { try SettingPath($0) }
        #expect(SettingDirectory.commonDirectory(of: paths)?.rawValue == expected)
    }

    @Test func commonDirectoryOfNothingIsNil() {
        #expect(SettingDirectory.commonDirectory(of: [SettingPath]()) == nil)
        #expect(SettingLocation.enclosing([SettingPath]()) == nil)
    }

    @Test func changedSignalPathIsTheKeyWhenOneKeyChanged() throws {
        let theme = try SettingPath("/org/example/theme")
        let size = try SettingPath("/org/example/font/size")
        #expect(SettingLocation.enclosing([theme]) == .key(theme))
        #expect(SettingLocation.enclosing([theme, theme]) == .key(theme))
        #expect(SettingLocation.enclosing([theme, size]) == .directory(try SettingDirectory("/org/example/")))
        let locations = [SettingLocation.directory(try SettingDirectory("/org/example/font/")), .key(size)]
        #expect(SettingLocation.enclosing(locations)?.rawValue == "/org/example/font/")
    }

    @Test func locationParsesKeysAndDirectories() throws {
        #expect(try SettingLocation("/a/b") == .key(SettingPath("/a/b")))
        #expect(try SettingLocation("/a/") == .directory(SettingDirectory("/a/")))
        #expect(try SettingLocation("/") == .directory(.root))
        #expect(throws: SettingsError.invalidKey("")) { try SettingLocation("/a//") }
        #expect(try SettingLocation("/a/").contains(SettingPath("/a/b")))
        #expect(try !SettingLocation("/a/c").contains(SettingPath("/a/b")))
    }

    @Test func pathsSortByTheirBytes() throws {
        let keys = try ["/b", "/a/z", "/a-b", "/a/b", "/A"].map { try SettingPath($0) }
        #expect(keys.sorted().map(\.rawValue) == ["/A", "/a-b", "/a/b", "/a/z", "/b"])
        #expect(try SettingDirectory("/a/") < SettingDirectory("/a/b/"))
    }
}
