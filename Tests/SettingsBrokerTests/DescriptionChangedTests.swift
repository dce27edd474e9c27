// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The `DescriptionChanged` signal: one per commit that registers, replaces or removes a schema, right after
/// that commit's `Changed`, seen by a binding stream and by `dbus-monitor`, for registrations sent by `gdbus`.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct DescriptionChangedTests {
    @Test func aRegistrationIsAnnouncedAfterItsChangedAndAnIdenticalOneIsNot() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            // Given: a stream of every signal of the interface, and a dbus-monitor of DescriptionChanged.
            let listener = try await bus.connect()
            let rule = MatchRule(
                sender: "io.github.settingsbus.Settings1", interface: "io.github.settingsbus.Settings1",
                path: "/io/github/settingsbus/Settings1")
            let signals = Collector(try await listener.signals(matching: rule))
            let monitor = try await Peers.monitor(
                bus,
                rules: ["type='signal',interface='io.github.settingsbus.Settings1',member='DescriptionChanged'"])
            try await withPeer(monitor) { monitor in
                #expect(try await Peers.gdbus(bus, "Set", ["/reg/x", "<'dark'>"]).status == 0)
                #expect(try await signals.next().member == "Changed")

                // When: a schema of another type is registered for the stored key.
                let registered = try await Peers.gdbus(bus, "Register", ["/reg/x", "i", "<5>", "{}"])
                #expect(registered.status == 0, "\(registered.stderr)")

                // Then: its Changed (the key now reads the default) comes first, then DescriptionChanged with the
                // same serial, naming the key, from the registering client.
                let changed = try await signals.next()
                #expect(changed.member == "Changed")
                #expect(changed.body.first == .string("/reg/x"))
                let described = try await signals.next()
                #expect(described.member == "DescriptionChanged")
                let signal = try Settings1.DescriptionChangedSignal(described.body)
                #expect(signal.path == .key(try SettingPath("/reg/x")))
                #expect(signal.keys == ["/reg/x"])
                #expect(signal.serial == (try Settings1.ChangedSignal(changed.body)).serial)
                #expect(signal.origin.hasPrefix(":"), "the origin is the client's unique name: \(signal.origin)")
                let (_, _) = try await monitor.line(where: { $0.contains("member=DescriptionChanged") })
                #expect(try await monitor.nextLine()?.trimmingCharacters(in: .whitespaces) == "string \"/reg/x\"")

                // And: an identical registration sends nothing (the next signal is the marker's Changed), and
                // one that changes only the summary sends DescriptionChanged alone.
                #expect(try await Peers.gdbus(bus, "Register", ["/reg/x", "i", "<5>", "{}"]).status == 0)
                #expect(try await Peers.gdbus(bus, "Set", ["/reg/marker", "<1>"]).status == 0)
                let marker = try await signals.next()
                #expect(marker.member == "Changed" && marker.body.first == .string("/reg/marker"))
                #expect(
                    try await Peers.gdbus(bus, "Register", ["/reg/x", "i", "<5>", "{'summary': <'Size'>}"]).status == 0)
                let summary = try await signals.next()
                #expect(summary.member == "DescriptionChanged")
                #expect(summary.body.first == .string("/reg/x"))
            }
            signals.stop()
            await listener.close()
            #expect(await broker.stop() == 0)
        }
    }
}
