// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// A GNOME key, registered on two machines from the GSettings schemas Debian ships, set with `gsettings`
/// through the `settingsbus` module on one and read with `gsettings` on the other.
@Suite(
    .sharingTheMachine,
    .timeLimit(.minutes(5)),
    .enabled(if: TestPostgres.unavailableReason == nil, "\(TestPostgres.unavailableReason ?? "")"))
struct SyncGnomeKeyTests {
    static let key = "/org/gnome/desktop/interface/color-scheme"

    @Test func aGsettingsSetOfAGnomeKeyOnAReachesGsettingsOnB() async throws {
        // Given: one XDG data folder for both machines, with Debian's GSettings schemas (compiled for gsettings,
        // read by the brokers beside settingsbus/schemas), and a folder of GIO modules with the backend.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-sync-gnome-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let gsettingsFolder = folder.appendingPathComponent("data/glib-2.0/schemas")
        let schemaFolder = folder.appendingPathComponent("data/settingsbus/schemas")
        let modules = folder.appendingPathComponent("modules")
        for made in [gsettingsFolder, schemaFolder, modules] {
            try FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
        }
        let debian = "/usr/share/glib-2.0/schemas"
        for name in try FileManager.default.contentsOfDirectory(atPath: debian)
        where name.hasSuffix(".xml") || name.hasSuffix(".override") {
            try FileManager.default.copyItem(atPath: debian + "/" + name, toPath: gsettingsFolder.appendingPathComponent(name).path)
        }
        let compiled = try await TestProcess.run("/usr/bin/glib-compile-schemas", [gsettingsFolder.path])
        try #require(compiled.status == 0, "\(compiled.stderr)")
        try FileManager.default.createSymbolicLink(
            atPath: modules.appendingPathComponent("libsettingsbus-gio.so").path,
            withDestinationPath: try BuiltProduct.path("libsettingsbus-gio.so"))
        func gsettings(_ machine: Machine, _ arguments: [String]) async throws -> TestProcess.Result {
            try await TestProcess.run(
                "/usr/bin/gsettings", arguments,
                environment: machine.bus.environment.merging([
                    "GSETTINGS_BACKEND": "settingsbus", "GIO_EXTRA_MODULES": modules.path,
                    "GSETTINGS_SCHEMA_DIR": gsettingsFolder.path,
                ]) { _, new in new })
        }

        try await withMachines(
            ["alpha", "beta"], extra: ["--sync-dir", "/org/gnome/desktop/interface/", "--schema-dir", schemaFolder.path]
        ) { _, machines in
            let (a, b) = (machines[0], machines[1])
            for machine in machines { try await Self.waitUntilRegistered(Self.key, on: machine) }
            #expect(try await b.get(Self.key) == "(<'default'>,)")

            // When: gsettings sets it on A, through the module.
            let set = try await gsettings(a, ["set", "org.gnome.desktop.interface", "color-scheme", "'prefer-dark'"])
            #expect(set.status == 0 && set.stderr.isEmpty, "\(set.stderr)")

            // Then: B's broker has it, as a user value, and gsettings on B reads it.
            try await waitForAgreement(machines, key: Self.key, expecting: "(<'prefer-dark'>,)")
            let read = try await gsettings(b, ["get", "org.gnome.desktop.interface", "color-scheme"])
            #expect(read.stdout == "'prefer-dark'\n" && read.stderr.isEmpty, "\(read.stdout) \(read.stderr)")
            let described = try await b.call("Describe", [Self.key])
            #expect(described.stdout.contains("'source': <'user'>"), "\(described.stdout)")
            // And: B still holds GNOME's choices for it.
            let refused = try await b.call("Set", [Self.key, "<'purple'>"])
            #expect(refused.status != 0 && refused.stderr.contains("OutOfRange"), "\(refused.stderr)")
        }
    }

    /// Waits until the machine's broker has registered `key` from the GSettings sources, which it reads after
    /// taking its name: `Describe`, then again at each `DescriptionChanged`, for at most 60 seconds.
    static func waitUntilRegistered(_ key: String, on machine: Machine) async throws {
        let connection = try await machine.bus.connect()
        let signals = Collector(
            try await connection.signals(
                matching: MatchRule(
                    sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "DescriptionChanged")))
        let deadline = ContinuousClock.now + .seconds(60)
        do {
            while try await !machine.call("Describe", [key]).stdout.contains("'registered': <true>") {
                _ = try await signals.next(timeLimit: max(.zero, deadline - ContinuousClock.now))
            }
        } catch {
            signals.stop()
            await connection.close()
            throw error
        }
        signals.stop()
        await connection.close()
    }
}
