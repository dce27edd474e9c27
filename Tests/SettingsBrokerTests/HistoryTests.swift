// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing

/// The broker keeps a bounded history of the commits that changed values: who wrote (the unique name and its
/// process), when, and each key's old and new user value; none of a secret key. `History` answers it.
@Suite(.timeLimit(.minutes(3)))
struct HistoryTests {
    /// The whole history, or what `request` asks for.
    static func history(
        _ connection: DBusConnection, _ request: Settings1.HistoryRequest = Settings1.HistoryRequest()
    ) async throws -> [Settings1.HistoryReply.Commit] {
        try Settings1.HistoryReply(try await connection.settings("History", request.body)).commits
    }

    @Test func historyRecordsEveryKindOfWriteWithItsOldAndNewValueAndTheWritersProcess() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Given: a key registered as secret.
            _ = try await connection.settings(
                "Register", [.string("/h/token"), .string("s"), .variant(.string("")), .stringMap([("secret", .boolean(true))])])

            // When: gdbus sets, python3-dbus applies, dbus-send sets from text, gdbus resets, and the secret
            // key is set.
            #expect(try await Peers.gdbus(bus, "Set", ["/h/a", "<'x'>"]).status == 0)
            let applied = try await Peers.python(
                bus, "Apply", signature: "a{sv}asa{sv}",
                "({'/h/a': dbus.String('y', variant_level=1), '/h/b': dbus.Int32(1, variant_level=1)}, [], {})")
            #expect(applied.stdout.hasPrefix("ok"), "\(applied.stdout) \(applied.stderr)")
            #expect(try await Peers.dbusSend(bus, "SetFromString", ["string:/h/b", "string:2"]).status == 0)
            #expect(try await Peers.gdbus(bus, "Reset", ["/h/a"]).status == 0)
            #expect(try await Peers.gdbus(bus, "Set", ["/h/token", "<'hunter2'>"]).status == 0)

            // Then: five commits, in order, each with the values before and after and its writer's process.
            let commits = try await Self.history(connection)
            try #require(commits.count == 5, "\(commits)")
            typealias Change = Settings1.HistoryReply.Change
            #expect(commits[0].changes == [Change(key: "/h/a", old: nil, new: .string("x"))])
            #expect(commits[0].process == "gdbus")
            #expect(
                commits[1].changes == [
                    Change(key: "/h/a", old: .string("x"), new: .string("y")), Change(key: "/h/b", old: nil, new: .int32(1)),
                ])
            #expect(commits[1].process == "python3")
            #expect(commits[2].changes == [Change(key: "/h/b", old: .int32(1), new: .int32(2))])
            #expect(commits[2].process == "dbus-send")
            #expect(commits[3].changes == [Change(key: "/h/a", old: .string("y"), new: nil)])
            // And: the secret key's change is there without its value.
            #expect(commits[4].changes == [Change(key: "/h/token", omitted: "secret", old: nil, new: nil)])
            #expect(commits.allSatisfy { $0.writer.hasPrefix(":") && $0.pid > 0 })
            #expect(zip(commits, commits.dropFirst()).allSatisfy { $0.serial < $1.serial && $0.time <= $1.time })
            let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
            #expect(commits.allSatisfy { abs($0.time - now) < 120_000_000 })

            // And: a key or a directory, a serial and a limit select commits.
            #expect(try await Self.history(connection, .init(location: .key(try SettingPath("/h/b")))).map(\.serial)
                == [commits[1].serial, commits[2].serial])
            let underH = try await Self.history(connection, .init(location: .directory(try SettingDirectory("/h/")), limit: 2))
            #expect(underH.map(\.serial) == [commits[3].serial, commits[4].serial])
            #expect(try await Self.history(connection, .init(sinceSerial: commits[2].serial)).count == 2)
            #expect(try await Self.history(connection, .init(location: .directory(try SettingDirectory("/hh/")))).isEmpty)
            // The secret value is in no reply and nowhere in the store's history.
            #expect(!"\(commits)".contains("hunter2"))
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func theHistoryLimitPrunesAndTheHistorySurvivesARestart() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--history-limit", "5"])
            let connection = try await bus.connect()
            // When: 20 commits.
            for index in 1...20 {
                _ = try await connection.settings("Set", [.string("/lim/k"), .variant(.int32(Int32(index)))])
            }
            // Then: the newest 5 are kept.
            let kept = try await Self.history(connection)
            #expect(kept.map(\.serial) == Array(16...20))
            #expect(kept.last?.changes == [.init(key: "/lim/k", old: .int32(19), new: .int32(20))])

            // And: after a restart they are still there, and pruning goes on.
            let (status, restarted) = try await broker.restart()
            #expect(status == 0)
            #expect(try await Self.history(connection).map(\.serial) == Array(16...20))
            _ = try await connection.settings("Set", [.string("/lim/k"), .variant(.int32(21))])
            #expect(try await Self.history(connection).map(\.serial) == Array(17...21))
            await connection.close()
            #expect(await restarted.stop() == 0)
        }
    }

    @Test func aHistoryLimitOfZeroKeepsNoHistory() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--history-limit", "0"])
            let connection = try await bus.connect()
            _ = try await connection.settings("Set", [.string("/off/k"), .variant(.int32(1))])
            #expect(try await Self.history(connection).isEmpty)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func badArgumentsToHistoryGetANamedErrorAndTheBrokerKeepsRunning() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            _ = try await connection.settings("Set", [.string("/bad/k"), .variant(.int32(1))])
            let refused: [(arguments: [String], error: String)] = [
                (["string:no-slash", "uint64:0", "int64:0", "uint32:0"], "io.github.settingsbus.Settings1.Error.InvalidKey"),
                (["string:/a//b", "uint64:0", "int64:0", "uint32:0"], "io.github.settingsbus.Settings1.Error.InvalidKey"),
                (["string:/", "uint64:0", "int64:-1", "uint32:0"], "io.github.settingsbus.Settings1.Error.InvalidValue"),
                // Arguments of the wrong types or number are refused by their signature.
                (["string:/", "string:0", "int64:0", "uint32:0"], "org.freedesktop.DBus.Error.InvalidArgs"),
                (["string:/", "uint64:0", "int64:0"], "org.freedesktop.DBus.Error.InvalidArgs"),
            ]
            for (arguments, error) in refused {
                let result = try await Peers.dbusSend(bus, "History", arguments)
                #expect(ReportedError(result)?.name == error, "\(arguments): \(result.stderr)")
            }
            // The broker still serves, with nothing lost.
            #expect(try await connection.settings("Get", [.string("/bad/k")]) == [.variant(.int32(1))])
            #expect(try await Self.history(connection).count == 1)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
