// SPDX-License-Identifier: Apache-2.0

import Foundation
@testable import SettingsBroker
import SettingsModel
import Testing
import TestMachine

/// The rules a sandboxed app is confined by, without a bus: how `/.flatpak-info` names an app, how an app id
/// maps to its subtree, and the shared keys' files. `SandboxedAppTests` runs them against real sandboxes.
@Suite(.sharingTheMachine) struct AppConfinementTests {
    @Test func anApplicationInfoNamesItsAppAndARuntimeOrAMissingNameProvesNone() throws {
        let app = FlatpakInfo.appID(in: "[Application]\nname=org.example.Editor\nruntime=runtime/x/1\n\n[Instance]\nx=1\n")
        #expect(try app.get() == "org.example.Editor")
        // Spaces around the key and the value, comments and blank lines are allowed.
        #expect(try FlatpakInfo.appID(in: "# made by flatpak\n[Application]\n name = org.example.Editor \n").get() == "org.example.Editor")
        for (text, problem) in [
            ("[Runtime]\nname=org.example.Platform\n", "runtime"),
            ("[Application]\nname=org.example.Editor\n[Runtime]\nname=x\n", "runtime"),
            ("[Instance]\nname=org.example.Editor\n", "no [Application]"),
            ("[Application]\nruntime=x\n", "no name"),
            ("[Application\nname=x\n", "no ']'"),
            ("", "no [Application]"),
        ] {
            switch FlatpakInfo.appID(in: text) {
            case .success(let id): Issue.record("\(text.debugDescription) proved \(id)")
            case .failure(let failure): #expect(failure.description.contains(problem), "\(failure)")
            }
        }
    }

    @Test func anAppIdMapsToItsReversedDomainSubtree() throws {
        let app = try AppConfinement.make(appID: "org.example.Editor").get()
        let none = SharedKeys.List()
        #expect(app.subtree.rawValue == "/org/example/Editor/")
        #expect(app.writes(try SettingPath("/org/example/Editor/font-size"), shared: none))
        #expect(app.writes(try SettingPath("/org/example/Editor/deep/key"), shared: none))
        #expect(!app.writes(try SettingPath("/org/example/EditorX/key"), shared: none))
        #expect(!app.writes(try SettingPath("/org/example/key"), shared: none))
        #expect(!app.writes(.directory(try SettingDirectory("/org/example/")), shared: none))
        // Names that make no subtree prove no app, nor does a name of fewer than three elements (as with Flatpak).
        for id in [
            "Editor", "org..Editor", ".org.Editor", "org.example.Editor/evil", "org.ex ample.Editor", "org.1x.Editor", "",
            "org.example",
        ] {
            #expect(throws: ProcessProof.InfoProblem.self, "\(id)") { try AppConfinement.make(appID: id).get() }
        }
    }

    @Test func aSharedKeyIsReadOnlyInAnAppsOwnSubtree() throws {
        var shared = SharedKeys.List()
        shared.keys = [try SettingPath("/org/gnome/desktop/interface/color-scheme")]
        shared.directories = [try SettingDirectory("/org/freedesktop/appearance/")]
        let interface = try AppConfinement.make(appID: "org.gnome.desktop.interface").get()
        #expect(interface.reads(try SettingPath("/org/gnome/desktop/interface/color-scheme"), shared: shared))
        #expect(!interface.writes(try SettingPath("/org/gnome/desktop/interface/color-scheme"), shared: shared))
        #expect(interface.writes(try SettingPath("/org/gnome/desktop/interface/clock-format"), shared: shared))
        #expect(!interface.writes(.directory(try SettingDirectory("/org/gnome/desktop/interface/")), shared: shared))
        let appearance = try AppConfinement.make(appID: "org.freedesktop.appearance").get()
        #expect(!appearance.writes(try SettingPath("/org/freedesktop/appearance/color-scheme"), shared: shared))
        #expect(!appearance.writes(.directory(try SettingDirectory("/org/freedesktop/appearance/")), shared: shared))
        #expect(!appearance.writes(.directory(try SettingDirectory("/org/freedesktop/appearance/deep/")), shared: shared))
    }

    @Test func theAdministratorsFileReplacesTheSharedKeysAndTheUsersAddsAndTakesAway() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-shared-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let administrator = folder.appendingPathComponent("admin-sandbox-shared").path
        let user = folder.appendingPathComponent("user-sandbox-shared").path
        let shared = SharedKeys(administratorFile: administrator, userFile: user)
        let editor = try AppConfinement.make(appID: "org.example.Editor").get()
        func reads(_ key: String) throws -> Bool { editor.reads(try SettingPath(key), shared: shared.list) }

        // No file: the default list, the appearance.
        #expect(try reads("/org/freedesktop/appearance/color-scheme"))
        #expect(try reads("/org/gnome/desktop/interface/font-name"))
        #expect(try !reads("/org/gnome/desktop/interface/clock-format"))
        #expect(editor.reads(try SettingDirectory("/org/freedesktop/appearance/"), shared: shared.list))
        #expect(!editor.reads(try SettingDirectory("/org/freedesktop/"), shared: shared.list))

        // The administrator's file replaces the list; a line that is not a path is reported by file and line.
        try "# shared\n/org/example/shared/\n/org/gnome/desktop/interface/clock-format\nnot a path\n".write(
            toFile: administrator, atomically: true, encoding: .utf8)
        let replaced = SharedKeys(administratorFile: administrator, userFile: user)
        #expect(editor.reads(try SettingPath("/org/example/shared/x"), shared: replaced.list))
        #expect(editor.reads(try SettingPath("/org/gnome/desktop/interface/clock-format"), shared: replaced.list))
        #expect(!editor.reads(try SettingPath("/org/freedesktop/appearance/color-scheme"), shared: replaced.list))
        #expect(replaced.problems == ["\(administrator):4: 'not a path' is neither a key nor a directory"])

        // The user's file adds and takes away.
        try "/org/example/mine\n-/org/example/shared/\n".write(toFile: user, atomically: true, encoding: .utf8)
        let both = SharedKeys(administratorFile: administrator, userFile: user)
        #expect(editor.reads(try SettingPath("/org/example/mine"), shared: both.list))
        #expect(!editor.reads(try SettingPath("/org/example/shared/x"), shared: both.list))
        #expect(editor.reads(try SettingPath("/org/gnome/desktop/interface/clock-format"), shared: both.list))
    }
}
