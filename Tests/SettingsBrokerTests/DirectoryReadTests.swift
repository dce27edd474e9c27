// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `ReadTree`, `List`, `Reset` and compare-and-set on a directory take exactly the keys below it, from the
/// broker's ordered index of keys: not a neighbour whose name starts the same way (`/a/bc`, `/a/b.`, `/a/b-`,
/// `/a/b0` beside `/a/b/`), whether a key has a user value, a schema or both, after resets and new writes; and a
/// directory larger than one piece of a read is still read as of one serial.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct DirectoryReadTests {
    static func tree(_ connection: DBusConnection, _ directory: String) async throws -> DBusValue? {
        try await connection.settings("ReadTree", [.string(directory)]).first
    }

    static func list(_ connection: DBusConnection, _ directory: String) async throws -> [String] {
        guard case .array(_, let names)? = try await connection.settings("List", [.string(directory)]).first else {
            Issue.record("List did not return an array")
            return []
        }
        return names.compactMap { if case .string(let name) = $0 { name } else { nil } }
    }

    static func register(_ connection: DBusConnection, _ key: String, _ signature: String, _ value: DBusValue) async throws {
        _ = try await connection.settings("Register", [.string(key), .string(signature), .variant(value), .stringMap([])])
    }

    static func set(_ connection: DBusConnection, _ key: String, _ value: DBusValue) async throws {
        _ = try await connection.settings("Set", [.string(key), .variant(value)])
    }

    @Test func directoryReadsTakeExactlyTheKeysBelowTheDirectory() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Given: below /a/b/ a key with a value only, one with a schema only, one with both, one whose value
            // has another type than its schema, and nested directories; beside it, keys that share its prefix.
            // A value stored before its key is registered with another type stays, unserved.
            try await Self.set(connection, "/a/b/mistyped", .string("x"))
            try await Self.register(connection, "/a/b/schema-only", "i", .int32(1))
            try await Self.register(connection, "/a/b/both", "i", .int32(2))
            try await Self.register(connection, "/a/b/mistyped", "i", .int32(3))
            try await Self.register(connection, "/a/bc/schema", "s", .string("neighbour"))
            for (key, value) in [
                ("/a/b/value-only", DBusValue.string("v")), ("/a/b/both", .int32(20)),
                ("/a/b/n/m", .int32(4)), ("/a/b/n/o/p", .int32(5)), ("/a/b", .int32(6)), ("/a/bc", .int32(7)),
                ("/a/b.", .int32(8)), ("/a/b-", .int32(9)), ("/a/b0", .int32(10)), ("/a/k", .int32(11)),
                ("/a/b-/z", .int32(12)), ("/a/b.d/z", .int32(13)), ("/z", .int32(14)),
            ] {
                try await Self.set(connection, key, value)
            }

            // Then: each directory reads exactly its own keys, with the effective values.
            #expect(
                try await Self.tree(connection, "/a/b/")
                    == .stringMap([
                        ("/a/b/both", .int32(20)), ("/a/b/mistyped", .int32(3)), ("/a/b/n/m", .int32(4)),
                        ("/a/b/n/o/p", .int32(5)), ("/a/b/schema-only", .int32(1)), ("/a/b/value-only", .string("v")),
                    ]))
            #expect(try await Self.tree(connection, "/a/b/n/") == .stringMap([("/a/b/n/m", .int32(4)), ("/a/b/n/o/p", .int32(5))]))
            #expect(try await Self.tree(connection, "/a/b-/") == .stringMap([("/a/b-/z", .int32(12))]))
            #expect(try await Self.tree(connection, "/a/bc/") == .stringMap([("/a/bc/schema", .string("neighbour"))]))
            #expect(try await Self.tree(connection, "/a/b/n/o/p/") == .stringMap([]))
            #expect(try await Self.tree(connection, "/nothing/") == .stringMap([]))
            #expect(try await Self.list(connection, "/a/b/") == ["both", "mistyped", "n/", "schema-only", "value-only"])
            #expect(
                try await Self.list(connection, "/a/")
                    == ["b", "b-", "b-/", "b.", "b.d/", "b/", "b0", "bc", "bc/", "k"])
            #expect(try await Self.list(connection, "/") == ["a/", "z"])
            #expect(try await Self.list(connection, "/a/b/n/") == ["m", "o/"])
            let all = try #require(try await Self.tree(connection, "/")?.entries)
            #expect(all.count == 16)

            // When: /a/b/ is reset.
            _ = try await connection.settings("Reset", [.string("/a/b/")])

            // Then: only its schemas' defaults remain below it, and its neighbours keep their values.
            #expect(
                try await Self.tree(connection, "/a/b/")
                    == .stringMap([("/a/b/both", .int32(2)), ("/a/b/mistyped", .int32(3)), ("/a/b/schema-only", .int32(1))]))
            #expect(try await Self.list(connection, "/a/b/") == ["both", "mistyped", "schema-only"])
            #expect(
                try await Self.list(connection, "/a/")
                    == ["b", "b-", "b-/", "b.", "b.d/", "b/", "b0", "bc", "bc/", "k"])
            #expect(try await Self.tree(connection, "/a/b-/") == .stringMap([("/a/b-/z", .int32(12))]))
            #expect(try await connection.settings("GetMany", [.array(.string, ["/a/b", "/a/bc", "/a/b.", "/a/b-", "/a/b0"].map(DBusValue.string))]).first
                == .stringMap([("/a/b", .int32(6)), ("/a/b-", .int32(9)), ("/a/b.", .int32(8)), ("/a/b0", .int32(10)), ("/a/bc", .int32(7))]))

            // When: keys below it are set again, and a neighbour is reset.
            try await Self.set(connection, "/a/b/n/m", .int32(40))
            try await Self.set(connection, "/a/b/value-only", .string("again"))
            _ = try await connection.settings("Reset", [.string("/a/b-")])
            _ = try await connection.settings("Reset", [.string("/a/b.d/")])

            // Then: they are read again, and the neighbour is gone from its parent's list only.
            #expect(
                try await Self.tree(connection, "/a/b/")
                    == .stringMap([
                        ("/a/b/both", .int32(2)), ("/a/b/mistyped", .int32(3)), ("/a/b/n/m", .int32(40)),
                        ("/a/b/schema-only", .int32(1)), ("/a/b/value-only", .string("again")),
                    ]))
            #expect(try await Self.list(connection, "/a/b/") == ["both", "mistyped", "n/", "schema-only", "value-only"])
            #expect(try await Self.list(connection, "/a/") == ["b", "b-/", "b.", "b/", "b0", "bc", "bc/", "k"])
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func compareAndSetOnADirectoryLooksOnlyBelowIt() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            for key in ["/c/d/one", "/c/d/sub/two", "/c/dx", "/c/d-", "/c/d.", "/c/d0/k"] { try await Self.set(connection, key, .int32(1)) }
            func applyReset(_ directory: String, ifSerial serial: UInt64) async throws -> DBusError? {
                do {
                    _ = try await connection.settings(
                        "Apply", [.stringMap([]), .array(.string, [.string(directory)]), .stringMap([("if-serial", .uint64(serial))])])
                    return nil
                } catch let error as DBusError {
                    return error
                }
            }
            func applySet(_ key: String, reset directory: String, ifSerial serial: UInt64) async throws -> DBusError? {
                do {
                    _ = try await connection.settings(
                        "Apply",
                        [.stringMap([(key, .int32(2))]), .array(.string, [.string(directory)]), .stringMap([("if-serial", .uint64(serial))])])
                    return nil
                } catch let error as DBusError {
                    return error
                }
            }
            let conflict = "io.github.settingsbus.Settings1.Error.Conflict"

            // Given: a serial read, after which only neighbours of /c/d/ change (set and reset).
            var read = try await connection.brokerSerial()
            for key in ["/c/dx", "/c/d.", "/c/d0/k"] { try await Self.set(connection, key, .int32(3)) }
            _ = try await connection.settings("Reset", [.string("/c/d-")])
            // Then: a compare-and-set that resets /c/d/ (and sets a key elsewhere) succeeds.
            #expect(try await applySet("/c/other", reset: "/c/d/", ifSerial: read) == nil)
            #expect(try await Self.tree(connection, "/c/d/") == .stringMap([]))
            #expect(try await Self.tree(connection, "/c/") == .stringMap([("/c/d.", .int32(3)), ("/c/d0/k", .int32(3)), ("/c/dx", .int32(3)), ("/c/other", .int32(2))]))

            // Given: keys below /c/d/ again, a serial, then one of them changes deep down.
            for key in ["/c/d/one", "/c/d/sub/two"] { try await Self.set(connection, key, .int32(1)) }
            read = try await connection.brokerSerial()
            try await Self.set(connection, "/c/d/sub/two", .int32(5))
            // Then: Conflict naming it, and nothing is reset.
            let changed = try await applyReset("/c/d/", ifSerial: read)
            #expect(changed?.name.rawValue == conflict)
            #expect(changed?.message.contains("/c/d/sub/two") == true, "\(String(describing: changed))")
            #expect(try await Self.tree(connection, "/c/d/") == .stringMap([("/c/d/one", .int32(1)), ("/c/d/sub/two", .int32(5))]))

            // Given: a serial, then a key below /c/d/ is reset (it has no value any more).
            read = try await connection.brokerSerial()
            _ = try await connection.settings("Reset", [.string("/c/d/one")])
            // Then: Conflict, saying it was reset.
            let reset = try await applyReset("/c/d/", ifSerial: read)
            #expect(reset?.name.rawValue == conflict)
            #expect(reset?.message.contains("/c/d/one under /c/d/ was reset") == true, "\(String(describing: reset))")
            // And: against the current serial the reset goes through, and the reset of a whole directory counts
            // as a change of each key it removed.
            read = try await connection.brokerSerial()
            #expect(try await applyReset("/c/d/", ifSerial: read) == nil)
            #expect(try await applyReset("/c/", ifSerial: read)?.name.rawValue == conflict)
            #expect(try await applyReset("/c/d0/", ifSerial: read) == nil)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aDirectoryLargerThanOneReadPieceIsReadAsOfOneSerial() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Given: 3,000 keys in /big/ (six pieces of a read) and a neighbour, all written in one commit each time.
            let count = 3000
            let first = (0..<count).map { ("/big/d\($0 % 7)/k\($0)", DBusValue.int32(0)) } + [("/bigger", .int32(0))]
            _ = try await connection.settings("Apply", [.stringMap(first), .array(.string, []), .stringMap([])])
            #expect(try await Self.list(connection, "/big/") == (0..<7).map { "d\($0)/" })
            #expect(try await Self.list(connection, "/big/d3/").count == (0..<count).filter { $0 % 7 == 3 }.count)

            // When: a second connection rewrites every key, commit after commit, while the first reads the
            // directory again and again.
            let writerConnection = try await bus.connect()
            let writer = Task {
                var round = 1
                while !Task.isCancelled, round < 400 {
                    let sets = (0..<count).map { ("/big/d\($0 % 7)/k\($0)", DBusValue.int32(Int32(round))) }
                    _ = try await writerConnection.settings("Apply", [.stringMap(sets), .array(.string, []), .stringMap([])])
                    round += 1
                }
            }
            var seen = Set<Int32>()
            for _ in 0..<30 {
                let reply = try await connection.settings("ReadTree", [.string("/big/")])
                let entries = try #require(reply.first?.entries)
                // Then: each reply holds every key, all with the value of one commit.
                #expect(entries.count == count)
                let values = Set(entries.map { $0.value })
                #expect(values.count == 1, "a reply mixed \(values.count) commits")
                if case .variant(.int32(let round))? = values.first { seen.insert(round) }
                // And: two keys the commits write in different pieces are read from the same commit.
                for _ in 0..<10 {
                    let pair = try #require(
                        try await connection.settings("GetMany", [.array(.string, [.string("/big/d0/k0"), .string("/big/d3/k2999")])])
                            .first?.entries)
                    #expect(pair.count == 2 && pair[0].value == pair[1].value, "GetMany mixed two commits: \(pair)")
                }
            }
            writer.cancel()
            _ = try? await writer.value
            #expect(seen.count > 1, "the writer never committed between reads")
            await writerConnection.close()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A `Reset` of a directory is prepared off the connection's thread, but writes still take effect in the
    /// order they arrived: a `Set` sent right after it, without waiting for its reply, is not undone by it.
    @Test func writesSentWithoutWaitingTakeEffectInTheirOrderAroundADirectoryReset() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let connection = try await bus.connect()
            // Given: a directory large enough that its reset is not instant.
            let filler = (0..<2_000).map { DBusDictEntry(key: .string("/test/order/f\($0)"), value: .variant(.int32(1))) }
            _ = try await connection.settings(
                "Apply", [.dictionary(key: .string, value: .variant, filler), .array(.string, []), .stringMap([])])

            // When: 20 rounds of Reset of the directory then Set of a key in it, each sent without waiting.
            let result = try await TestProcess.run(
                Peers.pythonPath, [Peers.script("pipelined_writes.py"), "/test/order/", "20"],
                environment: bus.environment, timeLimit: .seconds(60))
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")

            // Then: the last Set stands, and the filler is gone.
            #expect(try await connection.settings("Get", [.string("/test/order/k")]) == [.variant(.int32(19))])
            let tree = try await connection.settings("ReadTree", [.string("/test/order/")])
            #expect(tree.first == .dictionary(key: .string, value: .variant, [DBusDictEntry(key: .string("/test/order/k"), value: .variant(.int32(19)))]))
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

}
