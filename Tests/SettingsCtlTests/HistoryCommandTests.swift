// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// `settingsctl log` prints the broker's history of commits, and `settingsctl undo` restores what one commit
/// changed, as a new commit, unless a key changed since.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct HistoryCommandTests {
    @Test func logPrintsEachChangeAsATableAndAsJSON() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["set", "/log/a", "'x'"])
            _ = try await Ctl.output(bus, ["set", "/log/a", "'y'"])
            _ = try await Ctl.output(bus, ["set", "/log/b", "uint32 7"])
            _ = try await Ctl.output(bus, ["reset", "/log/a"])

            // The table: serial, local time, process (unique name), key, old → new.
            let lines = try await Ctl.output(bus, ["log"]).split(separator: "\n").map(String.init)
            try #require(lines.count == 4, "\(lines)")
            let expected = [
                ("1", "/log/a  (none) → 'x'"), ("2", "/log/a  'x' → 'y'"), ("3", "/log/b  (none) → uint32 7"),
                ("4", "/log/a  'y' → (none)"),
            ]
            for (line, (serial, change)) in zip(lines, expected) {
                #expect(line.hasPrefix("\(serial)  "), "\(line)")
                #expect(line.contains("  settingsctl (:"), "\(line)")
                #expect(line.hasSuffix(change), "\(line)")
            }
            // A key, --since and --limit select.
            #expect(try await Ctl.output(bus, ["log", "/log/b"]).split(separator: "\n").count == 1)
            #expect(try await Ctl.output(bus, ["log", "--since", "2"]).split(separator: "\n").count == 2)
            #expect(try await Ctl.output(bus, ["log", "--since", "1h"]).split(separator: "\n").count == 4)
            #expect(try await Ctl.output(bus, ["log", "--limit", "1"]).hasPrefix("4  "))
            try await Ctl.failure(bus, ["log", "--since", "yesterday-ish"], status: 2, message: "--since takes")

            // JSON: one array of commits, each value a record.
            let json = try await Ctl.output(bus, ["log", "--json", "/log/"])
            let commits = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
            try #require(commits.count == 4)
            #expect(commits.map { $0["serial"] as? Int } == [1, 2, 3, 4])
            #expect(commits.allSatisfy { $0["process"] as? String == "settingsctl" })
            let second = try #require((commits[1]["changes"] as? [[String: Any]])?.first)
            #expect(second["key"] as? String == "/log/a")
            #expect((second["old"] as? [String: Any])?["text"] as? String == "'x'")
            #expect((second["new"] as? [String: Any])?["text"] as? String == "'y'")
            let reset = try #require((commits[3]["changes"] as? [[String: Any]])?.first)
            #expect(reset["new"] is NSNull)
            #expect(await broker.stop() == 0)
        }
    }

    @Test func undoRestoresAsANewCommitThatWatchersHear() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["set", "/undo/a", "'old'"])
            _ = try await Ctl.output(bus, ["set", "/undo/a", "'new'"])
            _ = try await Ctl.output(bus, ["set", "/undo/fresh", "5"])
            let connection = try await bus.connect()
            let changes = Collector(
                try await connection.signals(
                    matching: MatchRule(
                        sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "Changed")))

            // When: commit 2 is undone.
            #expect(try await Ctl.output(bus, ["undo", "2"]) == "undid commit 2 as commit 4\n")
            // Then: the value is back, a watcher heard it, and the history has the undo as commit 4.
            #expect(try await Ctl.output(bus, ["get", "/undo/a"]) == "'old'\n")
            let heard = try await changes.next()
            #expect(heard.body[0] == .string("/undo/a"))
            #expect(heard.body[3] == .uint64(4))
            #expect(try await Ctl.output(bus, ["log", "--limit", "1"]).hasSuffix("/undo/a  'new' → 'old'\n"))

            // And: undoing a key's first value resets it.
            #expect(try await Ctl.output(bus, ["undo", "3"]) == "undid commit 3 as commit 5\n")
            try await Ctl.failure(bus, ["get", "/undo/fresh"], status: 3, message: "/undo/fresh")
            changes.stop()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func undoRefusesWhenAKeyChangedSinceOrItsValuesAreSecret() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["set", "/race/a", "1"])
            _ = try await Ctl.output(bus, ["set", "/race/b", "1"])
            _ = try await Ctl.output(bus, ["set", "/race/a", "2"])
            // Commit 1 set /race/a, which commit 3 changed since: refused, naming the key, nothing written.
            try await Ctl.failure(bus, ["undo", "1"], status: 6, message: "/race/a changed since commit 1")
            #expect(try await Ctl.output(bus, ["get", "/race/a"]) == "2\n")
            #expect(try await Ctl.output(bus, ["log"]).split(separator: "\n").count == 3)
            // A serial the history does not hold.
            try await Ctl.failure(bus, ["undo", "99"], status: 3, message: "no commit 99")

            // A secret key's commit holds no values to restore.
            _ = try await Ctl.output(bus, ["register", "-"], input: "[/race/]\ntoken.type=s\ntoken.default=''\ntoken.secret=true\n")
            _ = try await Ctl.output(bus, ["set", "/race/token", "'hunter2'"])
            let serial = try #require(try await Ctl.output(bus, ["log", "--limit", "1"]).split(separator: " ").first)
            try await Ctl.failure(bus, ["undo", String(serial)], status: 1, message: "/race/token, a secret key")
            #expect(try await Ctl.output(bus, ["log", "/race/token"]).contains("(secret) → (secret)"))
            #expect(await broker.stop() == 0)
        }
    }

}

/// `settingsctl log` and `undo` over a history larger than one message: run on their own by scripts/test (see
/// `LargeHistoryTests`).
@Suite(.aloneOnTheMachine, .timeLimit(.minutes(3)))
struct LargeHistoryCommandTests {
    @Test func logAndUndoWorkOnAHistoryLargerThanOneMessage() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--history-size", "0"])
            _ = try await Ctl.output(bus, ["set", "/big/other", "1"])
            // Given: more history than one reply may carry (32 MiB): 11 commits of 100 values of 15 KiB, each
            // with the values before them.
            let connection = try await bus.connect()
            let keys = try (0..<100).map { try SettingPath("/big/k\($0)") }
            for round in 0..<11 {
                let value = DBusValue.string(String(repeating: String(round), count: 15 * 1024))
                let apply = Settings1.ApplyRequest(sets: keys.map { ($0, value) }, resets: [])
                _ = try await connection.call(
                    destination: TestBroker.busName, path: "/io/github/settingsbus/Settings1",
                    interface: "io.github.settingsbus.Settings1", member: "Apply", arguments: apply.body)
            }
            await connection.close()

            // Then: log prints every change, page after page, oldest first; --limit the newest.
            let lines = try await Ctl.output(bus, ["log"]).split(separator: "\n")
            #expect(lines.count == 1 + 11 * 100)
            #expect(lines.first?.hasPrefix("1  ") == true)
            #expect(lines.last?.hasPrefix("12  ") == true)
            #expect(try await Ctl.output(bus, ["log", "--limit", "2"]).split(separator: "\n").first?.hasPrefix("11  ") == true)
            let json = try await Ctl.output(bus, ["log", "--json", "--since", "10"])
            let commits = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])
            #expect(commits.map { $0["serial"] as? Int } == [11, 12])

            // And: undo of the first commit reads it alone, not the 33 MB after it, and restores it.
            #expect(try await Ctl.output(bus, ["undo", "1"]) == "undid commit 1 as commit 13\n")
            try await Ctl.failure(bus, ["get", "/big/other"], status: 3, message: "/big/other")
            #expect(await broker.stop() == 0)
        }
    }
}
