// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `settingsctl check`: a schema file checked alone, against its previous version, and against a broker,
/// with the exit statuses a package build relies on.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct CheckTests {
    static let v1 = """
        [/org/example/dxapp/]
        theme.type=s
        theme.default='system'
        theme.choices=['system', 'light', 'dark']
        size.type=i
        size.default=12
        size.range=6,72
        """
    /// A compatible version 2: a choice added, a wider range, a new summary and a new key.
    static let v2 = """
        [/org/example/dxapp/]
        theme.type=s
        theme.default='system'
        theme.summary=Colour theme
        theme.choices=['system', 'light', 'dark', 'sepia']
        size.type=i
        size.default=12
        size.range=4,96
        zoom.type=d
        zoom.default=1.0
        """
    /// An incompatible version: a choice removed and another type.
    static let v3 = """
        [/org/example/dxapp/]
        theme.type=s
        theme.default='system'
        theme.choices=['system', 'dark']
        size.type=d
        size.default=12.0
        """

    static func files(_ texts: [String: String]) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("settingsctl-check-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for (name, text) in texts {
            try (text + "\n").write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        return directory
    }

    @Test func aSoundFileAloneExits0AndABrokenOneExits4NamingTheLine() async throws {
        let directory = try Self.files(["v1.schema": Self.v1, "broken.schema": "[/org/example/]\ntheme.type=s\ntheme.default=42\n"])
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withTestBus { bus in
            let good = try await Ctl.run(bus, ["check", directory.appendingPathComponent("v1.schema").path])
            #expect(good.status == 0, "\(good.stderr)")
            #expect(good.stdout.contains("2 keys, no incompatible change"), "\(good.stdout)")
            let broken = try await Ctl.run(bus, ["check", directory.appendingPathComponent("broken.schema").path])
            #expect(broken.status == 4, "\(broken.stderr)")
            #expect(broken.stderr.contains("broken.schema: line 3:"), "\(broken.stderr)")
        }
    }

    @Test func changesFromThePreviousVersionAreListedAndAnIncompatibleOneExits6() async throws {
        let directory = try Self.files(["v1.schema": Self.v1, "v2.schema": Self.v2, "v3.schema": Self.v3])
        defer { try? FileManager.default.removeItem(at: directory) }
        func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
        try await withTestBus { bus in
            let compatible = try await Ctl.run(bus, ["check", "--previous", path("v1.schema"), path("v2.schema")])
            #expect(compatible.status == 0, "\(compatible.stderr)")
            #expect(compatible.stdout.contains("/org/example/dxapp/theme: compatible: choices"), "\(compatible.stdout)")
            #expect(compatible.stdout.contains("/org/example/dxapp/size: compatible: range 6…72 → 4…96"))
            #expect(compatible.stdout.contains("/org/example/dxapp/zoom: new"))

            let incompatible = try await Ctl.run(bus, ["check", "--previous", path("v1.schema"), path("v3.schema")])
            #expect(incompatible.status == 6, "\(incompatible.stderr)")
            #expect(
                incompatible.stdout.contains(
                    "/org/example/dxapp/theme: INCOMPATIBLE: choices 'system', 'light', 'dark' → 'system', 'dark'"),
                "\(incompatible.stdout)")
            #expect(incompatible.stdout.contains("/org/example/dxapp/size: INCOMPATIBLE: type 'i' → 'd'"))
            #expect(incompatible.stderr.contains("2 incompatible changes"))
        }
    }

    @Test func aFileIsComparedWithWhatTheBrokerHasRegisteredAndNothingIsRegistered() async throws {
        let directory = try Self.files(["v1.schema": Self.v1, "v3.schema": Self.v3])
        defer { try? FileManager.default.removeItem(at: directory) }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["register", directory.appendingPathComponent("v1.schema").path])
            let checked = try await Ctl.run(bus, ["check", "--registered", directory.appendingPathComponent("v3.schema").path])
            #expect(checked.status == 6, "\(checked.stderr)")
            #expect(checked.stdout.contains("/org/example/dxapp/theme: INCOMPATIBLE: choices"), "\(checked.stdout)")
            // Nothing changed at the broker.
            let described = try await Ctl.output(bus, ["describe", "/org/example/dxapp/size"])
            #expect(VerbTests.fields(described)["signature"] == "i", "\(described)")
            #expect(await broker.stop() == 0)
        }
    }
}
