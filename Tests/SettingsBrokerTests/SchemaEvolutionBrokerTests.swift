// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// A key registered again by a new version of an app, from `gdbus`: compatible changes accepted, incompatible
/// ones refused naming the field unless replaced, and values of a narrower type converted without loss.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct SchemaEvolutionBrokerTests {
    static let conflict = "io.github.settingsbus.Settings1.Error.SchemaConflict"

    @Test func aNewVersionOfAnAppRegistersCompatibleChangesAndMustReplaceIncompatibleOnes() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let key = "/org/example/dxapp/theme"
            func register(_ options: String, default value: String = "<'system'>") async throws -> TestProcess.Result {
                try await Peers.gdbus(bus, "Register", [key, "s", value, options])
            }
            // Version 1.
            #expect(try await register("{'choices': <['system', 'light', 'dark']>}").status == 0)
            _ = try await Peers.gdbus(bus, "Set", [key, "<'dark'>"])

            // Version 2: a choice added, a summary, another default: accepted, with no error.
            let v2 = try await register(
                "{'choices': <['system', 'light', 'dark', 'sepia']>, 'summary': <'Colour theme'>}", default: "<'light'>")
            #expect(v2.status == 0, "\(v2.stderr)")
            #expect(try await Peers.gdbus(bus, "Set", [key, "<'sepia'>"]).status == 0)

            // Version 3 drops a choice: refused, naming the field with its old and new values.
            let v3 = try await register("{'choices': <['system', 'light', 'sepia']>}")
            let refused = try #require(ReportedError(v3), "\(v3.stdout)")
            #expect(refused.name == Self.conflict)
            #expect(
                refused.message.contains("choices 'system', 'light', 'dark', 'sepia' → 'system', 'light', 'sepia'"),
                "\(refused.message)")

            // Forced: accepted; the stored 'sepia' is still valid and kept.
            let forced = try await register("{'choices': <['system', 'light', 'sepia']>, 'replace': <true>}")
            #expect(forced.status == 0, "\(forced.stderr)")
            #expect(try await Peers.gdbus(bus, "Get", [key]).stdout.contains("'sepia'"))
            #expect(await broker.stop() == 0)
        }
    }

    /// A value stored before its key was registered (by `settingsctl set KEY 14`, `dconf load`, `gdbus … <14>`)
    /// is an `int32`; an app that registers the key as Swift's `Int` (`x`) reads it, converted in the store.
    @Test func valuesOfANarrowerTypeAreConvertedAtRegistrationAndOnWrites() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            #expect(try await Peers.gdbus(bus, "Set", ["/test/convert/size", "<14>"]).status == 0)
            var rule = MatchRule(sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "Changed")
            rule.arguments[0] = "/test/convert/size"
            let signals = Collector(try await connection.signals(matching: rule))

            // When: the key is registered as int64.
            #expect(try await Peers.gdbus(bus, "Register", ["/test/convert/size", "x", "<int64 11>", "{}"]).status == 0)

            // Then: the stored value is converted, in one commit announced by one signal, and read as int64.
            let signal = try await signals.next()
            #expect(GVariantText.format(signal.body[1]).contains("int64 14"), "\(signal.body)")
            #expect(try await connection.settings("Get", [.string("/test/convert/size")]) == [.variant(.int64(14))])
            // And: a Set of an int32 is stored as int64; a narrowing one is still refused.
            #expect(try await Peers.gdbus(bus, "Set", ["/test/convert/size", "<15>"]).status == 0)
            #expect(try await connection.settings("Get", [.string("/test/convert/size")]) == [.variant(.int64(15))])
            let double = try await Peers.gdbus(bus, "Set", ["/test/convert/size", "<15.5>"])
            #expect(ReportedError(double)?.name == "io.github.settingsbus.Settings1.Error.TypeMismatch")
            signals.stop()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A forced narrowing keeps the stored value that the new schema refuses: not served, described, and
    /// served again when a later schema accepts it.
    @Test func aValueTheReplacingSchemaRefusesIsKeptAndNotServed() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            let key = "/test/evolve/volume"
            #expect(try await Peers.gdbus(bus, "Register", [key, "i", "<50>", "{'range': <(0, 100)>}"]).status == 0)
            #expect(try await Peers.gdbus(bus, "Set", [key, "<80>"]).status == 0)

            // When: a new version narrows the range, replacing.
            let narrowed = try await Peers.gdbus(bus, "Register", [key, "i", "<50>", "{'range': <(0, 60)>, 'replace': <true>}"])
            #expect(narrowed.status == 0, "\(narrowed.stderr)")

            // Then: the key reads its default, and Describe keeps the value and says why.
            #expect(try await connection.settings("Get", [.string(key)]) == [.variant(.int32(50))])
            let described = try await Peers.gdbus(bus, "Describe", [key])
            #expect(described.stdout.contains("'value': <80>"), "\(described.stdout)")
            #expect(described.stdout.contains("out of range"), "\(described.stdout)")

            // When: a later version widens the range again. Then: the kept value is served.
            #expect(try await Peers.gdbus(bus, "Register", [key, "i", "<50>", "{'range': <(0, 100)>}"]).status == 0)
            #expect(try await connection.settings("Get", [.string(key)]) == [.variant(.int32(80))])
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

}
