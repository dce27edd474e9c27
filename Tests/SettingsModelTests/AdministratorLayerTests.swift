// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

/// Reading the administrator's files: defaults in the keyfile format, locks one per line, problems by line.
struct AdministratorLayerTests {
    func key(_ text: String) throws -> SettingPath { try SettingPath(text) }

    @Test func aDconfSystemDatabaseKeyfileReadsAsDefaults() throws {
        // The form of /etc/dconf/db/local.d/00-background: groups without a leading slash.
        let text = """
            # Company wallpaper
            [org/gnome/desktop/background]
            picture-uri='file:///usr/share/backgrounds/company.png'
            picture-options='zoom'

            [org/example/editor]
            font-size=uint32 12
            """
        let content = try AdministratorLayer.parse(text, as: .defaults, file: "00-background.conf")
        let uri = try #require(content.defaults[try key("/org/gnome/desktop/background/picture-uri")])
        #expect(uri.value == .string("file:///usr/share/backgrounds/company.png"))
        #expect(uri.source == AdministratorLayer.Source(file: "00-background.conf", line: 3))
        #expect(content.defaults[try key("/org/example/editor/font-size")]?.value == .uint32(12))
        #expect(content.defaults.count == 3)
    }

    @Test func locksNameKeysAndDirectoriesAndADirectoryLocksEverythingBelowIt() throws {
        let text = """
            # Locked for every user
            /org/gnome/desktop/background/picture-uri
            /org/example/kiosk/
            """
        let content = try AdministratorLayer.parse(text, as: .locks, file: "locks.d/00-kiosk")
        let layer = AdministratorLayer(files: [content])
        #expect(layer.lock(of: try key("/org/gnome/desktop/background/picture-uri"))?.line == 2)
        #expect(layer.lock(of: try key("/org/gnome/desktop/background/picture-options")) == nil)
        #expect(layer.lock(of: try key("/org/example/kiosk/mode"))?.line == 3)
        #expect(layer.lock(of: try key("/org/example/kiosk/deep/below"))?.line == 3)
        #expect(layer.lock(of: try key("/org/example/kiosks")) == nil)
    }

    @Test func aLaterFileReplacesAnEarlierFilesDefault() throws {
        let first = try AdministratorLayer.parse("[a]\nb=1\nc=2\n", as: .defaults, file: "10.conf")
        let second = try AdministratorLayer.parse("[a]\nb=3\n", as: .defaults, file: "20.conf")
        let layer = AdministratorLayer(files: [first, second])
        #expect(layer.defaults[try key("/a/b")]?.value == .int32(3))
        #expect(layer.defaults[try key("/a/b")]?.source.file == "20.conf")
        #expect(layer.defaults[try key("/a/c")]?.value == .int32(2))
    }

    @Test(arguments: [
        ("[a]\nb=not gvariant\n", AdministratorLayer.FileKind.defaults, 2),
        ("b=1\n", .defaults, 1),
        ("[a]\n\n[bad group\n", .defaults, 3),
        ("[a]\nBad Name=1\n", .defaults, 2),
        ("# fine\n/ok/key\nnot/absolute\n", .locks, 3),
        ("/a//b\n", .locks, 1),
    ])
    func aBrokenLineIsNamedWithItsFileAndNumber(text: String, kind: AdministratorLayer.FileKind, line: Int) {
        #expect {
            _ = try AdministratorLayer.parse(text, as: kind, file: "/etc/settingsbus/x")
        } throws: { error in
            guard let problem = error as? AdministratorLayer.Problem else { return false }
            return problem.line == line && problem.file == "/etc/settingsbus/x"
                && problem.description.hasPrefix("/etc/settingsbus/x: line \(line): ")
        }
    }

    @Test func aDefaultPastTheLimitsOfAStoredValueIsAProblem() {
        let huge = "[a]\nb='" + String(repeating: "x", count: SettingsBusNames.maximumValueSize + 10) + "'\n"
        #expect(throws: AdministratorLayer.Problem.self) {
            try AdministratorLayer.parse(huge, as: .defaults, file: "big.conf")
        }
    }

    @Test func onlyConfFilesAreDefaultsAndHiddenOrBackupFilesAreSkipped() {
        #expect(AdministratorLayer.reads("00-site.conf", as: .defaults))
        #expect(!AdministratorLayer.reads("00-site", as: .defaults))
        #expect(AdministratorLayer.reads("00-site", as: .locks))
        #expect(!AdministratorLayer.reads(".00-site.conf", as: .defaults))
        #expect(!AdministratorLayer.reads("00-site~", as: .locks))
    }
}

extension AdministratorLayerTests {
    @Test func everyProblemOfAFileIsListedWithItsLine() {
        let text = """
            [a]
            good=1
            bad=not gvariant
            [broken
            skipped=1
            [c]
            Bad Name=2
            """
        let problems = AdministratorLayer.problems(in: text, as: .defaults, file: "f.conf")
        #expect(problems.map(\.line) == [3, 4, 7])
        let locks = AdministratorLayer.problems(in: "/ok\nno\n/a//b\n", as: .locks, file: "l")
        #expect(locks.map(\.line) == [2, 3])
    }
}
