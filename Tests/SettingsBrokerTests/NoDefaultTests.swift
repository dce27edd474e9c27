// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// A key registered without a default (`Register` option `no-default`, from `gdbus`): no value until one is set,
/// its type still enforced, described without a default, and kept so across a restart.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct NoDefaultTests {
    static let unknownKey = "io.github.settingsbus.Settings1.Error.UnknownKey"
    static let typeMismatch = "io.github.settingsbus.Settings1.Error.TypeMismatch"

    @Test func aKeyWithoutADefaultHasNoValueUntilSetAndKeepsItsType() async throws {
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus)
            // The default argument is ignored, but must have the signature's type.
            let wrongType = try #require(
                ReportedError(try await Peers.gdbus(bus, "Register", ["/nd/home", "s", "<5>", "{'no-default': <true>}"])))
            #expect(wrongType.name == Self.typeMismatch)
            let registered = try await Peers.gdbus(
                bus, "Register", ["/nd/home", "s", "<''>", "{'no-default': <true>, 'summary': <'Home'>}"])
            #expect(registered.status == 0, "\(registered.stderr)")

            #expect(ReportedError(try await Peers.gdbus(bus, "Get", ["/nd/home"]))?.name == Self.unknownKey)
            let connection = try await bus.connect()
            let describe = try Settings1.DescribeReply(try await connection.settings("Describe", [.string("/nd/home")]))
            #expect(describe.schema == SettingSchema(type: .string, defaultValue: nil, summary: "Home"))
            #expect(describe.fields.dictionary["default"] == nil)
            #expect(ReportedError(try await Peers.gdbus(bus, "Set", ["/nd/home", "<5>"]))?.name == Self.typeMismatch)
            #expect(try await Peers.gdbus(bus, "Set", ["/nd/home", "<'/home/ada'>"]).status == 0)
            #expect(Peers.squeezed(try await Peers.gdbus(bus, "Get", ["/nd/home"])) == "(<'/home/ada'>,)")
            #expect(try await Peers.gdbus(bus, "Reset", ["/nd/home"]).status == 0)
            #expect(ReportedError(try await Peers.gdbus(bus, "Get", ["/nd/home"]))?.name == Self.unknownKey)

            // After a restart the schema still has no default.
            await connection.close()
            let restarted = try await broker.restart()
            #expect(restarted.exitStatus == 0)
            broker = restarted.broker
            let again = try await bus.connect()
            let after = try Settings1.DescribeReply(try await again.settings("Describe", [.string("/nd/home")]))
            #expect(after.schema == describe.schema)
            await again.close()
            #expect(await broker.stop() == 0)
        }
    }
}
