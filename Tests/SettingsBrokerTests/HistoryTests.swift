// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The broker keeps a bounded history of the commits that changed values: who wrote (the unique name and its
/// process), when, and each key's old and new user value; none of a secret key. `History` answers it.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
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

    /// Every page of what `request` asks for.
    static func allHistory(
        _ connection: DBusConnection, _ request: Settings1.HistoryRequest = Settings1.HistoryRequest()
    ) async throws -> [Settings1.HistoryReply.Commit] {
        var commits: [Settings1.HistoryReply.Commit] = []
        var next: Settings1.HistoryRequest? = request
        while let asked = next {
            let reply = try Settings1.HistoryReply(try await connection.settings("History", asked.body))
            commits += reply.commits
            next = asked.next(after: reply, answered: commits.count)
        }
        return commits
    }

    /// A string of `size` bytes of one digit, the digit `seed`'s last.
    static func blob(_ seed: Int, size: Int = 15 * 1024) -> DBusValue {
        .string(String(repeating: String(seed % 10), count: size))
    }

    /// The number after each place `mark` is found in `bytes` (one pass over them).
    static func numbers(after mark: [UInt8], in bytes: [UInt8]) -> [Int] {
        guard let first = mark.first, bytes.count >= mark.count else { return [] }
        var found: [Int] = []
        var index = 0
        while index <= bytes.count - mark.count {
            if bytes[index] == first, bytes[index..<(index + mark.count)].elementsEqual(mark) {
                let digits = bytes[(index + mark.count)...].prefix { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
                if let number = Int(String(decoding: digits, as: UTF8.self)) { found.append(number) }
                index += mark.count
            } else {
                index += 1
            }
        }
        return found
    }

    /// The bytes the pages of table `history` take in the store file (sqlite3's `dbstat`).
    static func historyPages(_ path: String) async throws -> Int {
        let text = try await runSQLite(path, "SELECT SUM(pgsize) FROM dbstat WHERE name = 'history';")
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    @Test func aWritersRowLeavesTheHistoryWithItsLastCommit() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--history-limit", "10"])
            // When: 40 writers of their own (unique names) change a value, then 70 more write the value it has
            // already (no commit), then one more changes it.
            for index in 0..<110 {
                let writer = try await bus.connect()
                _ = try await writer.settings("Set", [.string("/writers/k"), .variant(.int32(Int32(min(index, 40))))])
                await writer.close()
            }
            let last = try await bus.connect()
            _ = try await last.settings("Set", [.string("/writers/k"), .variant(.int32(-1))])
            // Then: the writers' table names only writers of the 10 commits kept (one more at most, whose row
            // was written after the last pruning); it had a row for each of the 111 writers.
            let rows = try await runSQLite(
                broker.storePath, "SELECT COUNT(*) FROM history_writers; SELECT COUNT(DISTINCT origin) FROM history;"
            ).split(separator: "\n").compactMap { Int($0) }
            #expect(rows.count == 2 && rows[1] == 10 && rows[0] <= rows[1] + 1, "\(rows)")
            #expect(try await Self.history(last).count == 10)
            await last.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aKeyMadeSecretLaterLeavesNoPastValueInTheHistory() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Given: values of a key, then of another, in the history.
            _ = try await connection.settings("Set", [.string("/later/token"), .variant(.string("hunter2"))])
            _ = try await connection.settings("Set", [.string("/later/token"), .variant(.string("hunter3"))])
            _ = try await connection.settings("Set", [.string("/later/other"), .variant(.string("plain"))])

            // When: the key is registered as secret.
            _ = try await connection.settings(
                "Register",
                [.string("/later/token"), .string("s"), .variant(.string("")), .stringMap([("secret", .boolean(true))])])

            // Then: its commits are kept without values, the other key's value is kept, and the store file's
            // history holds no value of the key.
            let commits = try await Self.history(connection)
            typealias Change = Settings1.HistoryReply.Change
            #expect(commits.map(\.changes) == [
                [Change(key: "/later/token", omitted: "secret", old: nil, new: nil)],
                [Change(key: "/later/token", omitted: "secret", old: nil, new: nil)],
                [Change(key: "/later/other", old: nil, new: .string("plain"))],
            ])
            let rows = try await runSQLite(
                broker.storePath, "SELECT key, omitted, IFNULL(old_value, 'NULL'), IFNULL(new_value, 'NULL') FROM history;")
            #expect(!rows.contains("hunter"), "\(rows)")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}

/// The history's tests that write tens of MiB into the store: run on their own by scripts/test, after the
/// others, so that their writes and reads of large values do not take the CPUs and the disk that timed tests
/// beside them need.
@Suite(.aloneOnTheMachine, .timeLimit(.minutes(3)))
struct LargeHistoryTests {
    @Test func aHistoryLargerThanOneMessageIsAnsweredAPageAtATime() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--history-size", "0"])
            let connection = try await bus.connect()
            // Given: more history than one reply may carry (32 MiB): 11 commits of 100 values of 15 KiB (3 MiB
            // each with the values before them), then 200 commits of one such value.
            let keys = try (0..<100).map { try SettingPath("/page/k\($0)") }
            for round in 0..<11 {
                let apply = Settings1.ApplyRequest(sets: keys.map { ($0, HistoryTests.blob(round)) }, resets: [])
                _ = try await connection.settings("Apply", apply.body)
            }
            for index in 0..<200 {
                _ = try await connection.settings("Set", [.string("/page/small"), .variant(HistoryTests.blob(index))])
            }

            // When: the whole history is asked for, page after page.
            var pages: [[Settings1.HistoryReply.Commit]] = []
            var answered = 0
            var next: Settings1.HistoryRequest? = Settings1.HistoryRequest()
            while let request = next {
                let reply = try Settings1.HistoryReply(try await connection.settings("History", request.body))
                pages.append(reply.commits)
                answered += reply.commits.count
                next = request.next(after: reply, answered: answered)
            }

            // Then: every commit once, in order, each reply a page (or one commit larger than a page).
            #expect(pages.flatMap { $0 }.map(\.serial) == Array(1...211))
            for page in pages where page.count > 1 {
                #expect(Settings1.HistoryReply(commits: page).body[0].approximateSize <= Settings1.HistoryReply.pageSize)
            }
            #expect(pages.count > 12, "\(pages.map(\.count))")
            #expect(pages.flatMap { $0 }.first?.changes.count == 100)
            #expect(pages.flatMap { $0 }.last?.changes == [.init(key: "/page/small", old: HistoryTests.blob(198), new: HistoryTests.blob(199))])

            // And: a limit pages the same way: the newest 150 commits.
            var limited: [Settings1.HistoryReply.Commit] = []
            next = Settings1.HistoryRequest(limit: 150)
            while let request = next {
                let reply = try Settings1.HistoryReply(try await connection.settings("History", request.body))
                limited += reply.commits
                next = request.next(after: reply, answered: limited.count)
            }
            #expect(limited.map(\.serial) == Array(62...211))
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// 2,000 pipelined writes of a 15 KiB value pass through the store file, with the default history (4 MiB): the
    /// file and its backup stay near what the store holds, and no value that left the history is in either (not in
    /// a page freed).
    @Test func theStoreFileStaysNearWhatItHoldsAndKeepsNoValueThatLeftTheHistory() async throws {
        try await withTestBus { bus in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-size-\(UUID())")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            let broker = try await TestBroker.start(on: bus, storePath: folder.appendingPathComponent("settings.db").path)
            let connection = try await bus.connect()
            let mark = "overwritten-\(UUID().uuidString)-"
            let value: @Sendable (Int) -> DBusValue = { index in
                .string(mark + "\(index)-" + String(repeating: String(index % 10), count: 15 * 1024))
            }
            // Sent without waiting for each reply: the broker commits them in large groups.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<2_000 {
                    group.addTask { _ = try await connection.settings("Set", [.string("/size/k"), .variant(value(index))]) }
                }
                try await group.waitForAll()
            }
            // The writes were sent in no set order: the values still held are the key's and those of the history
            // the broker keeps (its newest 4 MiB, about 140 commits), named by their numbers.
            let kept = try await HistoryTests.allHistory(connection)
            #expect(kept.count > 100 && kept.count < 2_000, "the history keeps \(kept.count) commits")
            let current = try await connection.settings("Get", [.string("/size/k")])
            let held = (kept.flatMap(\.changes).flatMap { [$0.old, $0.new] } + current.map { Optional($0) })
                .compactMap { value -> Int? in
                    guard case .string(let text)? = value.map({ if case .variant(let inner) = $0 { inner } else { $0 } })
                    else { return nil }
                    return HistoryTests.numbers(after: Array(mark.utf8), in: Array(text.utf8)).first
                }
            #expect(held.count > 100)
            await connection.close()
            // A clean stop writes the backup.
            #expect(await broker.stop() == 0)

            func size(_ path: String) -> Int {
                ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
            }
            let (store, backup) = (size(broker.storePath), size(broker.storePath + ".backup"))
            // The history's 4 MiB, the value and the tables' pages.
            #expect(store <= 8 << 20, "the store file is \(store) bytes")
            #expect(backup > 0 && backup <= store, "the backup is \(backup) bytes, the store \(store)")
            let heldNumbers = Set(held)
            for file in [broker.storePath, broker.storePath + "-wal", broker.storePath + ".backup"] {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                let left = HistoryTests.numbers(after: Array(mark.utf8), in: [UInt8](data)).filter { !heldNumbers.contains($0) }
                #expect(left.isEmpty, "\(file) still holds \(left.count) values that left the history: \(left.prefix(5))")
            }
        }
    }

    @Test func theHistoryIsBoundedInBytesByDefault() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--history-limit", "1000"])
            let connection = try await bus.connect()
            // When: 600 commits of a 15 KiB value, each with the value before it (18 MB of values in all).
            for index in 0..<600 {
                _ = try await connection.settings("Set", [.string("/size/k"), .variant(HistoryTests.blob(index))])
            }
            // Then: the history's pages in the store file take about the default 4 MiB, no more.
            let pages = try await HistoryTests.historyPages(broker.storePath)
            #expect(pages <= 5 << 20, "\(pages) bytes")
            #expect(pages >= 3 << 20, "\(pages) bytes")
            let kept = try await HistoryTests.allHistory(connection)
            #expect(kept.last?.serial == 600)
            #expect(kept.count < 150 && kept.count > 100, "\(kept.count)")

            // And: a commit whose values take more than a quarter of the size is kept without them.
            let keys = try (0..<80).map { try SettingPath("/size/many\($0)") }
            let apply = Settings1.ApplyRequest(sets: keys.map { ($0, HistoryTests.blob(7)) }, resets: [])
            _ = try await connection.settings("Apply", apply.body)
            let large = try #require(try await HistoryTests.history(connection, .init(limit: 1)).first)
            #expect(large.changes.count == 80 && large.changes.allSatisfy { $0.omitted == "large" && $0.new == nil })
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

}
