// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// One connection's writes take effect in the order it sent them, whatever their kind: `Apply` and `Register`
/// are staged in line with `Set`, `SetFromString`, `Reset` and `Unregister`, not overtaken by them.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct WriteOrderTests {
    @Test func mixedPipelinedWritesOfEveryKindTakeEffectInTheOrderSentAndNoSecretIsBroadcast() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            let monitor = try await Peers.monitor(bus, rules: ["type='signal',interface='\(Peers.name)'"])
            let rounds = 40

            // When: a python3-dbus peer sends rounds of every kind of write, without waiting for any reply.
            let result = try await TestProcess.run(
                Peers.pythonPath, [Peers.script("mixed_pipelined_writes.py"), "/test/mixed/", "\(rounds)"],
                environment: bus.environment, timeLimit: .seconds(120))
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            // Every signal of those writes has reached the monitor once the signal of a later write has.
            _ = try await connection.settings("Set", [.string("/test/mixed-end"), .variant(.boolean(true))])
            let (_, signals) = try await monitor.line(where: { $0.contains("/test/mixed-end") }, timeLimit: .seconds(60))
            await monitor.terminate()

            // Then: each round ends as its writes, applied in the order sent, leave it.
            for number in 0..<rounds {
                let directory = "/test/mixed/\(number)/"
                #expect(try await connection.settings("Get", [.string(directory + "a")]) == [.variant(.int32(Int32(10 * number + 1)))],
                    "an Apply then a Set of \(directory)a")
                #expect(try await connection.settings("Get", [.string(directory + "sub/b")]) == [.variant(.int32(2))],
                    "a Reset of \(directory)sub/ then an Apply in it")
                #expect(try await connection.settings("Get", [.string(directory + "c")]) == [.variant(.string("z"))],
                    "Register, Set, Unregister, SetFromString of \(directory)c")
                #expect(try await connection.settings("Get", [.string(directory + "n")]) == [.variant(.uint64(5))],
                    "a Register of \(directory)n as t then a SetFromString of it")
                await #expect(throws: DBusError.self, "a Set then an Apply that resets \(directory)e") {
                    _ = try await connection.settings("Get", [.string(directory + "e")])
                }
            }
            // And: no secret value went out in a signal, nor into the history.
            let leaked = signals.filter { $0.contains("hunter-") }
            #expect(leaked.isEmpty, "secret values broadcast: \(leaked.prefix(3))")
            #expect(signals.contains { $0.contains("/test/mixed/") }, "the monitor saw the writes' signals")
            let history = try await connection.settings(
                "History", [.string("/test/mixed/"), .uint64(0), .int64(0), .uint32(0)])
            #expect(!"\(history)".contains("hunter-"), "secret values kept in the history")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
