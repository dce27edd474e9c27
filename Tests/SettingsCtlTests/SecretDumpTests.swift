// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `settingsctl dump` leaves the values of secret keys out unless `--include-secrets`, and `load` keeps such
/// a key secret where the dump is loaded, so its value never travels in a `Changed` signal.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct SecretDumpTests {
    static let schema = """
        [/test/sec/]
        token.type=s
        token.default=''
        token.summary=API token
        token.secret=true

        """

    static let dumpWithoutSecrets = """
        [/]
        port=8080
        #schema token.type=s
        #schema token.default=''
        #schema token.summary=API token
        #schema token.secret=true
        # token: secret, its value is left out (settingsctl dump --include-secrets writes it)

        """

    /// A broker with a secret key and a plain one under /test/sec/.
    static func startWithSecret(on bus: TestBus) async throws -> TestBroker {
        let broker = try await TestBroker.start(on: bus)
        _ = try await Ctl.output(bus, ["register", "-"], input: schema)
        _ = try await Ctl.output(bus, ["set", "/test/sec/token", "'hunter2'"])
        _ = try await Ctl.output(bus, ["set", "/test/sec/port", "8080"])
        return broker
    }

    @Test func dumpLeavesSecretValuesOutUnlessAskedAndKeepsTheirSchema() async throws {
        try await withTestBus { bus in
            let broker = try await Self.startWithSecret(on: bus)
            #expect(try await Ctl.output(bus, ["dump", "/test/sec/"]) == Self.dumpWithoutSecrets)
            let full = try await Ctl.output(bus, ["dump", "--include-secrets", "/test/sec/"])
            #expect(
                full == Self.dumpWithoutSecrets.replacing(
                    "# token: secret, its value is left out (settingsctl dump --include-secrets writes it)",
                    with: "token='hunter2'"),
                "\(full)")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func loadKeepsAKeySecretAndItsValueOutOfSignals() async throws {
        let dump = try await withTestBus { bus in
            let broker = try await Self.startWithSecret(on: bus)
            let dump = try await Ctl.output(bus, ["dump", "--include-secrets", "/test/sec/"])
            #expect(await broker.stop() == 0)
            return dump
        }
        try await withTestBus { bus in
            // Given: a new broker, where the key is not registered, and a subscriber to every change.
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            let changes = Collector(
                try await connection.signals(
                    matching: MatchRule(
                        sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "Changed")))

            // When: the dump with the secret value is loaded, and then a marker key is set.
            #expect(try await Ctl.output(bus, ["load", "/test/sec/"], input: dump) == "")
            _ = try await Ctl.output(bus, ["set", "/test/marker", "1"])

            // Then: no signal up to the marker's carried the secret value.
            var seen: [DBusMessage] = []
            _ = try await changes.next(where: { signal in
                seen.append(signal)
                return signal.body.first == .string("/test/marker")
            })
            for signal in seen {
                #expect(!"\(signal.body)".contains("hunter2"), "\(signal.body)")
            }
            // And: the key is secret there, with its value and summary.
            let description = try await Ctl.output(bus, ["describe", "/test/sec/token"])
            #expect(description.contains("secret:     true"), "\(description)")
            #expect(description.contains("summary:    API token"), "\(description)")
            #expect(try await Ctl.output(bus, ["get", "/test/sec/token"]) == "'hunter2'\n")
            #expect(try await Ctl.output(bus, ["dump", "--include-secrets", "/test/sec/"]) == dump)
            changes.stop()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
