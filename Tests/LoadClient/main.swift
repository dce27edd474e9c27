// SPDX-License-Identifier: Apache-2.0
//
// One client of the load test: `settingsbus-load-client <id> <keys> <seconds>`, on the session bus.
//
// It watches every key under /test/load/, then for `seconds` mixes reads, writes and fresh watches, and
// prints `written <count>`. It then waits for the test's final value of every key ("final-<n>") to arrive on
// its watch, prints `converged`, and exits 0. Any failed call is printed to stderr and makes it exit 1.

import Foundation
import DBus
import SettingsBus
import SettingsModel

let arguments = CommandLine.arguments
guard arguments.count == 4, let id = Int(arguments[1]), let keyCount = Int(arguments[2]),
    let seconds = Double(arguments[3])
else {
    FileHandle.standardError.write(Data("usage: settingsbus-load-client <id> <keys> <seconds>\n".utf8))
    exit(2)
}

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

let settings = BusSettingsStore()
let keys = (0..<keyCount).map { SettingKey(try! SettingPath("/test/load/key-\($0)"), default: "") }
let directory = try! SettingDirectory("/test/load/")

// Follow every key through one directory watch; remember the latest value of each.
final class Latest: @unchecked Sendable {
    // @unchecked Sendable: every access holds `lock`.
    private let lock = NSLock()
    private var values: [SettingPath: String] = [:]
    func record(_ update: SettingsUpdate) {
        lock.withLock {
            for (key, value) in update.values { if case .string(let text) = value { values[key] = text } }
            for key in update.removed { values[key] = nil }
        }
    }
    func value(_ key: SettingPath) -> String? { lock.withLock { values[key] } }
}
let latest = Latest()
func isFinal() -> Bool { keys.indices.allSatisfy { latest.value(keys[$0].path) == "final-\($0)" } }
let (finals, finalReached) = AsyncStream.makeStream(of: Void.self)
let watching = Task {
    for await update in settings.updates(of: .directory(directory)) {
        latest.record(update)
        if isFinal() { finalReached.yield(()) }
    }
}

var failures = 0
var written = 0
let end = Date().addingTimeInterval(seconds)
var sequence = 0
while Date() < end {
    sequence += 1
    let key = keys[Int.random(in: 0..<keys.count)]
    do {
        switch sequence % 4 {
        case 0, 1:
            _ = try await settings.get(key)
        case 2:
            try await settings.set(key, to: "client-\(id)-\(sequence)")
            written += 1
        default:
            // A short-lived watch of one key: subscribe, read the first value, end.
            for await _ in settings.values(for: key) { break }
        }
    } catch {
        failures += 1
        FileHandle.standardError.write(Data("call failed: \(error)\n".utf8))
    }
}
say("written \(written)")

// Wait (at most 60 s) until the watch shows the final value of every key.
await withTaskGroup(of: Void.self) { group in
    group.addTask { for await _ in finals { return } }
    group.addTask { try? await Task.sleep(for: .seconds(60)) }
    await group.next()
    group.cancelAll()
}
let converged = isFinal()
say(converged ? "converged" : "stale: " + keys.indices.map { latest.value(keys[$0].path) ?? "nil" }.joined(separator: ","))
watching.cancel()
await settings.close()
exit(failures == 0 && converged ? 0 : 1)
