// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// `Unregister`, from `gdbus` and `dbus-send`: the schema goes, the stored value stays (and is served as it
/// is) unless `remove-value` is set, watchers hear of it by `Changed` and `DescriptionChanged`, and the removal
/// outlives a restart.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct UnregisterTests {
    static let unknownKey = "io.github.settingsbus.Settings1.Error.UnknownKey"
    static let invalidValue = "io.github.settingsbus.Settings1.Error.InvalidValue"

    @Test func theSchemaGoesTheValueStaysAndBothSignalsSayWhatChanged() async throws {
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus)
            let listener = try await bus.connect()
            let rule = MatchRule(
                sender: "io.github.settingsbus.Settings1", interface: "io.github.settingsbus.Settings1",
                path: "/io/github/settingsbus/Settings1")
            let signals = Collector(try await listener.signals(matching: rule))

            // Given: a stored value the schema registered later does not serve (not one of its choices).
            #expect(try await Peers.gdbus(bus, "Set", ["/u/mode", "<'weird'>"]).status == 0)
            #expect(try await signals.next().member == "Changed")
            let registered = try await Peers.gdbus(
                bus, "Register", ["/u/mode", "s", "<'auto'>", "{'choices': <['auto', 'on']>}"])
            #expect(registered.status == 0, "\(registered.stderr)")
            #expect(try await signals.next().member == "Changed")
            #expect(try await signals.next().member == "DescriptionChanged")
            #expect(Peers.squeezed(try await Peers.gdbus(bus, "Get", ["/u/mode"])) == "(<'auto'>,)")

            // When: it is unregistered (dbus-send cannot send a{sv}: gdbus).
            let unregistered = try await Peers.gdbus(bus, "Unregister", ["/u/mode", "{}"])
            #expect(unregistered.status == 0, "\(unregistered.stderr)")

            // Then: the kept value is served again, announced by Changed, then DescriptionChanged.
            let changed = try Settings1.ChangedSignal(try await signals.next().body)
            #expect(changed.values == Settings1.ValueMap([("/u/mode", .string("weird"))]))
            let described = try Settings1.DescriptionChangedSignal(try await signals.next().body)
            #expect(described.keys == ["/u/mode"] && described.serial == changed.serial)
            #expect(Peers.squeezed(unregistered) == "(uint64 \(changed.serial),)")
            #expect(Peers.squeezed(try await Peers.gdbus(bus, "Get", ["/u/mode"])) == "(<'weird'>,)")

            // And: a key with only a default loses it (removed); one with neither is UnknownKey.
            #expect(try await Peers.gdbus(bus, "Register", ["/u/size", "i", "<10>", "{}"]).status == 0)
            #expect(try await signals.next().member == "DescriptionChanged")
            #expect(try await Peers.gdbus(bus, "Unregister", ["/u/size", "{}"]).status == 0)
            let removed = try Settings1.ChangedSignal(try await signals.next().body)
            #expect(removed.removed == ["/u/size"])
            #expect(try await signals.next().member == "DescriptionChanged")
            #expect(ReportedError(try await Peers.gdbus(bus, "Get", ["/u/size"]))?.name == Self.unknownKey)
            let unknown = try #require(ReportedError(try await Peers.gdbus(bus, "Unregister", ["/u/size", "{}"])))
            #expect(unknown.name == Self.unknownKey)
            #expect(unknown.message.contains("/u/size"), "\(unknown.message)")
            let badOption = try #require(
                ReportedError(try await Peers.gdbus(bus, "Unregister", ["/u/mode", "{'remove-value': <1>}"])))
            #expect(badOption.name == Self.invalidValue)

            // And: remove-value removes the value in the same commit.
            #expect(try await Peers.gdbus(bus, "Register", ["/u/width", "i", "<1>", "{}"]).status == 0)
            #expect(try await Peers.gdbus(bus, "Set", ["/u/width", "<7>"]).status == 0)
            #expect(try await Peers.gdbus(bus, "Unregister", ["/u/width", "{'remove-value': <true>}"]).status == 0)
            #expect(ReportedError(try await Peers.gdbus(bus, "Get", ["/u/width"]))?.name == Self.unknownKey)

            // And: after a restart, /u/mode is still unregistered (a value of another type is accepted).
            signals.stop()
            await listener.close()
            let restarted = try await broker.restart()
            #expect(restarted.exitStatus == 0)
            broker = restarted.broker
            let describe = try await Peers.gdbus(bus, "Describe", ["/u/mode"])
            #expect(Peers.squeezed(describe).contains("'registered': <false>"), "\(describe.stdout)")
            #expect(try await Peers.dbusSend(bus, "Set", ["string:/u/mode", "variant:int32:3"]).status == 0)
            #expect(await broker.stop() == 0)
        }
    }
}
