// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `settingsctl check-admin DIR`: a folder of administrator files checked before deployment, every problem
/// named with its file and line, and each default against the registered schema.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct CheckAdminTests {
    static func folder(_ files: [String: String]) throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settingsctl-admin-\(UUID())")
        for (name, text) in files {
            let file = folder.appendingPathComponent(name)
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: file, atomically: true, encoding: .utf8)
        }
        return folder
    }

    @Test func aSoundFolderPassesAndABrokenOneListsEveryProblem() async throws {
        let good = try Self.folder([
            "defaults.d/10-site.conf": "[org/example/app]\ntheme='dark'\nsize=14\n",
            "locks.d/site": "# kiosk\n/org/example/app/theme\n/org/example/kiosk/\n",
        ])
        let bad = try Self.folder([
            "defaults.d/10-site.conf": "[org/example/app]\ntheme='dark'\nsize=fourteen\n[also bad\n",
            "defaults.d/README": "not a .conf file\n",
            "locks.d/site": "/org/example/app/theme\norg/no-slash\n",
        ])
        defer {
            try? FileManager.default.removeItem(at: good)
            try? FileManager.default.removeItem(at: bad)
        }
        try await withTestBus { bus in
            let passed = try await Ctl.run(bus, ["check-admin", good.path])
            #expect(passed.status == 0, "\(passed.stderr)")
            #expect(passed.stdout == "\(good.path): 2 files, 2 defaults, 2 locks, no problem\n")

            let failed = try await Ctl.run(bus, ["check-admin", bad.path])
            #expect(failed.status == 4)
            let lines = failed.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 5, "\(failed.stdout)")
            #expect(lines.contains { $0.hasPrefix("\(bad.path)/defaults.d/10-site.conf: line 3: the value of /org/example/app/size") })
            #expect(lines.contains { $0.hasPrefix("\(bad.path)/defaults.d/10-site.conf: line 4: a group line is") })
            #expect(lines.contains { $0.hasPrefix("\(bad.path)/defaults.d/README: not read") })
            #expect(lines.contains { $0.hasPrefix("\(bad.path)/locks.d/site: line 2: 'org/no-slash' is not a key") })
            #expect(lines.last == "\(bad.path): 2 files, 0 defaults, 0 locks, 4 problems")
        }
    }

    @Test func aDefaultTheRegisteredSchemaRefusesIsNamed() async throws {
        let folder = try Self.folder([
            "defaults.d/10-site.conf": "[org/example/app]\ntheme='purple'\nsize=14\n"
        ])
        defer { try? FileManager.default.removeItem(at: folder) }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let schemas = "[/org/example/app/]\ntheme.default='dark'\ntheme.choices=['light', 'dark']\nsize.type=x\nsize.default=12\n"
            #expect(try await Ctl.output(bus, ["register", "-"], input: schemas) == "")
            let checked = try await Ctl.run(bus, ["check-admin", "--registered", folder.path])
            #expect(checked.status == 4)
            // The int32 14 converts to the key's int64, as the broker converts it; 'purple' is not a choice.
            #expect(checked.stdout.hasPrefix(
                "\(folder.path)/defaults.d/10-site.conf: line 2: /org/example/app/theme: the registered schema refuses"))
            #expect(checked.stdout.hasSuffix("1 file, 2 defaults, 0 locks, 1 problem\n"), "\(checked.stdout)")
            #expect(await broker.stop() == 0)
        }
    }

    /// The one line of settingsbus(7) that converts a dconf system database's source folder, run on one, then
    /// checked and served by a broker.
    @Test func theManualsLineConvertsADconfSystemDatabaseSource() async throws {
        // The page is roff: a minus is written \-, a backslash \e.
        let manual = try String(
            contentsOf: Ctl.repository.appendingPathComponent("docs/man/settingsbus.7"), encoding: .utf8
        ).replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\e", with: "\\")
        let prefix = "src=/etc/dconf/db/local.d dst=/etc/settingsbus;"
        let line = try #require(manual.split(separator: "\n").first { $0.hasPrefix(prefix) }, "the manual's line")
        let source = try Self.folder([
            "00-background": "# Company wallpaper\n[org/gnome/desktop/background]\npicture-uri='file:///usr/share/backgrounds/company.png'\n",
            "01-editor": "[org/example/editor]\nfont-size=uint32 12\n",
            "locks/00-background": "# Locked\n/org/gnome/desktop/background/picture-uri\n",
        ])
        let destination = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-admin-\(UUID())")
        defer {
            try? FileManager.default.removeItem(at: source)
            try? FileManager.default.removeItem(at: destination)
        }
        let command = "src=\(source.path) dst=\(destination.path);" + line.dropFirst(prefix.count)
        let converted = try await TestProcess.run("/bin/bash", ["-c", command], environment: [:])
        #expect(converted.status == 0, "\(converted.stderr)")
        try await withTestBus { bus in
            let checked = try await Ctl.run(bus, ["check-admin", destination.path])
            #expect(checked.status == 0, "\(checked.stdout)\(checked.stderr)")
            #expect(checked.stdout.hasSuffix("3 files, 2 defaults, 1 lock, no problem\n"), "\(checked.stdout)")
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", destination.path])
            let key = "/org/gnome/desktop/background/picture-uri"
            #expect(try await Ctl.output(bus, ["get", key]) == "'file:///usr/share/backgrounds/company.png'\n")
            let refused = try await Ctl.run(bus, ["set", key, "'mine.png'"])
            #expect(refused.status == 7, "\(refused.stderr)")
            #expect(refused.stderr.contains("locked by the administrator"), "\(refused.stderr)")
            #expect(try await Ctl.output(bus, ["get", "/org/example/editor/font-size"]) == "uint32 12\n")
            #expect(await broker.stop() == 0)
        }
    }

    /// A file larger than the broker reads is named and not read; a long line is quoted by a short prefix;
    /// a folder other users can write is named; a schema file too large for `check` is refused.
    @Test func oversizedFilesLongLinesAndFoldersOthersCanWriteAreNamed() async throws {
        let filler = String(repeating: "# a comment line, many times over, to make a file too large to read\n", count: 20_000)
        let folder = try Self.folder([
            "defaults.d/10-big.conf": "[org/example/app]\ntheme='dark'\n" + filler,
            "locks.d/long": "/org/example/app/size\n" + String(repeating: "y", count: 200_000) + "\n",
        ])
        defer { try? FileManager.default.removeItem(at: folder) }
        let schema = folder.appendingPathComponent("big.schema")
        try ("[/org/example/app/]\ntheme.type=s\n" + filler).write(to: schema, atomically: true, encoding: .utf8)
        try await withTestBus { bus in
            let failed = try await Ctl.run(bus, ["check-admin", folder.path])
            #expect(failed.status == 4)
            let lines = failed.stdout.split(separator: "\n").map(String.init)
            #expect(lines.allSatisfy { $0.utf8.count < 600 }, "\(lines.map { $0.utf8.count })")
            #expect(lines.contains { $0.hasPrefix("\(folder.path)/defaults.d/10-big.conf: ") && $0.contains("1048576") }, "\(lines)")
            #expect(lines.contains { $0.hasPrefix("\(folder.path)/locks.d/long: line 2: 'yyyyyyyyyy") && $0.contains("…") }, "\(lines)")

            #expect(chmod(folder.appendingPathComponent("locks.d").path, 0o777) == 0)
            let open = try await Ctl.run(bus, ["check-admin", folder.path])
            #expect(open.stdout.contains("\(folder.path)/locks.d: ") && open.stdout.contains("every user"), "\(open.stdout)")

            let check = try await Ctl.run(bus, ["check", schema.path])
            #expect(check.status != 0)
            #expect(check.stderr.contains("1048576"), "\(check.stderr)")
        }
    }
}
