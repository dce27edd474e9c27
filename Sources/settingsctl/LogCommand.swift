// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import Foundation
import SettingsBus
import SettingsModel

/// `settingsctl log [KEY|DIR] [--since SERIAL|TIME] [--limit N] [--json]`: who changed what, from the broker's
/// history of commits.
struct LogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Show the history of changes: when, by which process, each key's old and new value.",
        discussion: """
            Each line is one key a commit changed: the commit's serial, its local time, the writer's process \
            name and unique bus name, the key, and its old and new user value in GVariant text ('(none)' for \
            no user value: a reset, or a key set for the first time). Keys registered as secret show \
            '(secret)': the history keeps no values of them. The broker keeps the last commits that changed \
            values (settings-broker --history-limit, --history-age, --history-size); settingsctl undo SERIAL \
            restores what one of them changed. A long history is read from the broker a page at a time and \
            printed as it comes; with --json, as one array once every page is read.
            """)

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    @Argument(
        help: ArgumentHelp("A key, or a directory ending in '/' (default: every key).", valueName: "key-or-dir"),
        completion: KeyCompletion.keys)
    var location: String?

    @Option(
        help: ArgumentHelp(
            """
            Only commits after this serial (a number), or since this time: 2026-05-01, 2026-05-01T10:30 \
            (local time), or ago with s, m, h or d (90m, 2d).
            """, valueName: "serial-or-time"))
    var since: String?

    @Option(help: "Only the newest N commits (default: every commit kept).")
    var limit: UInt32 = 0

    func run() async throws {
        let location = try location.map { text throws(SettingsError) in try SettingLocation(text) } ?? .directory(.root)
        var request = Settings1.HistoryRequest(location: location, limit: limit)
        if let since {
            if let serial = UInt64(since) {
                request.sinceSerial = serial
            } else if let time = Self.time(since) {
                request.sinceTime = time
            } else {
                throw CtlError(
                    .usage,
                    "--since takes a serial, a date such as 2026-05-01 or 2026-05-01T10:30, or a time ago such as "
                        + "90m or 2d; not '\(since)'")
            }
        }
        let json = output.json
        var commits: [JSONValue] = []
        try await bus.withStore { store in
            try await Self.forEachPage(request, store: store) { page in
                if json {
                    commits += page.map(Self.json)
                } else {
                    Output.lines(page.flatMap(Self.lines))
                }
            }
        }
        if json { Output.json(JSONValue.array(commits)) }
    }

    /// Calls `body` with each page of the commits `request` asks for, oldest first (the broker answers a page
    /// of at most about 1 MiB at a time); at most `request.limit` commits in all (0: every one kept).
    static func forEachPage(
        _ request: Settings1.HistoryRequest, store: BusSettingsStore,
        _ body: ([Settings1.HistoryReply.Commit]) throws -> Void
    ) async throws {
        var next: Settings1.HistoryRequest? = request
        var answered = 0
        while let asked = next {
            var reply = try await store.call(asked)
            if request.limit > 0 { reply.commits = Array(reply.commits.prefix(Int(request.limit) - answered)) }
            answered += reply.commits.count
            try body(reply.commits)
            next = asked.next(after: reply, answered: answered)
        }
    }

    /// The lines of one commit in the table.
    static func lines(_ commit: Settings1.HistoryReply.Commit) -> [String] {
        let writer = commit.process.isEmpty ? commit.writer : "\(commit.process) (\(commit.writer))"
        let head = "\(commit.serial)  \(localTime(commit.time))  \(writer)"
        return commit.changes.map { change in
            "\(head)  \(change.key)  \(text(change.old, change)) → \(text(change.new, change))"
        }
    }

    static func text(_ value: DBusValue?, _ change: Settings1.HistoryReply.Change) -> String {
        if !change.omitted.isEmpty { return "(\(change.omitted))" }
        return value.map { GVariantText.format($0) } ?? "(none)"
    }

    /// A commit as JSON: serial, time (microseconds since the epoch and ISO 8601 text), writer, process, pid,
    /// and each change's key, old and new value as records (null for none), and `omitted`.
    static func json(_ commit: Settings1.HistoryReply.Commit) -> JSONValue {
        .object([
            ("serial", .uint(commit.serial)), ("time", .int(commit.time)), ("date", .string(isoTime(commit.time))),
            ("writer", .string(commit.writer)), ("process", .string(commit.process)), ("pid", .uint(UInt64(commit.pid))),
            (
                "changes",
                .array(
                    commit.changes.map { change in
                        .object([
                            ("key", .string(change.key)), ("omitted", .string(change.omitted)),
                            ("old", change.old.map(JSONValue.record) ?? .null),
                            ("new", change.new.map(JSONValue.record) ?? .null),
                        ])
                    })
            ),
        ])
    }

    static func localTime(_ micros: Int64) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: Date(timeIntervalSince1970: Double(micros) / 1_000_000))
    }

    static func isoTime(_ micros: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: Double(micros) / 1_000_000))
    }

    /// A time given to --since, in microseconds since the epoch: a date, a local date and time, or a time ago.
    static func time(_ text: String, now: Date = Date()) -> Int64? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        if let unit = text.last.flatMap({ units[$0] }), let count = Double(text.dropLast()), count >= 0 {
            return Int64((now.timeIntervalSince1970 - count * unit) * 1_000_000)
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        for format in ["yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd HH:mm", "yyyy-MM-dd"] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970 * 1_000_000) }
        }
        return nil
    }
}
