// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsModel
internal import Glibc

/// The child processes of a run: `settings-bench --role subscriber|writer …`.
enum Roles {
    /// Follows a key with `values(for:)`; prints `<value> <CLOCK_MONOTONIC ns>` for each value, the current
    /// one first. Runs until it is ended. With `onConnectionThread`, the stream is consumed in a task that
    /// prefers the store's executor (``BusSettingsStore/executor``), otherwise on the global executor. With
    /// `changes`, follows `changes(for:)` instead (for `docs/probes/fanout.py`), printing the current value
    /// from a `values(for:)` stream that it ends once the changes stream is live.
    static func subscriber(address: String, key path: String, onConnectionThread: Bool, changes: Bool = false) async throws {
        let settings = BusSettingsStore(bus: .address(address))
        let key = SettingKey(try SettingPath(path), default: "")
        await withTaskExecutorPreference(onConnectionThread ? settings.executor : nil) {
            guard changes else {
                for await value in settings.values(for: key) {
                    let stamp = monotonicNanoseconds()
                    printStamped(value, stamp)
                }
                return
            }
            let changes = settings.changes(for: key)
            // The two streams share the key's watch: once the values stream has its first value, the changes
            // stream is live.
            let values = settings.values(for: key)
            for await value in values {
                printLine("\(value) \(monotonicNanoseconds())")
                break
            }
            values.stop()
            for await change in changes {
                let stamp = monotonicNanoseconds()
                printStamped(change.value, stamp)
            }
        }
    }

    /// A subscriber that stops at a lower layer than ``subscriber(address:key:onConnectionThread:)``, to see
    /// what each layer costs (`docs/probes/fanout.py`): it subscribes to the broker's `Changed` signals of a key
    /// on a ``DBus/DBusConnection`` and prints `<value> <CLOCK_MONOTONIC ns>` for each, on the connection's
    /// thread as the signal is read, or, `throughStream`, from a task on the global executor that takes the
    /// values from an `AsyncStream`. Prints `ready` once subscribed; no current value, no store.
    static func layerSubscriber(address: String, key: String, throughStream: Bool) async throws {
        let connection = try await DBusConnection.connect(to: .address(address))
        var rule = MatchRule(interface: SettingsBusNames.interface, member: "Changed", path: SettingsBusNames.objectPath)
        rule.argumentPaths[0] = key
        let (values, sink) = AsyncStream.makeStream(of: String.self)
        let subscription = try await connection.forwardSignals(matching: rule) { message in
            guard message.body.count == 5, case .dictionary(_, _, let entries) = message.body[1] else { return }
            for entry in entries {
                guard case .string(key) = entry.key, case .variant(.string(let value)) = entry.value else { continue }
                if throughStream { sink.yield(value) } else { printLine("\(value) \(monotonicNanoseconds())") }
            }
        }
        defer { subscription.end() }
        printLine("ready")
        if throughStream {
            for await value in values { printLine("\(value) \(monotonicNanoseconds())") }
        } else {
            await connection.waitUntilClosed()
        }
    }

    /// Prints `ready` once connected, waits for a line on standard input, then writes distinct keys
    /// `<prefix>w<id>/k<n>` = `'w<id>-<n>'` one after another for `seconds`; prints
    /// `done <acknowledged> <failed> <first ns> <last ns>`.
    static func writer(system: String, address: String, prefix: String, id: Int, seconds: Double) async throws {
        let write: (Int) async throws -> Void
        let settings = BusSettingsStore(bus: .address(address))
        let connection = try await DBusConnection.connect(to: .address(address))
        switch system {
        case "settingsbus":
            _ = try await settings.read([])
            write = { index in
                let key = SettingKey(try SettingPath("\(prefix)w\(id)/k\(index)"), default: "")
                try await settings.set(key, to: "w\(id)-\(index)")
            }
        case "dconf":
            _ = try await connection.call(
                destination: Bench.dconfName, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping")
            write = { index in
                let blob = DconfChangeset.serialize([("\(prefix)w\(id)/k\(index)", "w\(id)-\(index)")])
                _ = try await connection.call(
                    destination: Bench.dconfName, path: "/ca/desrt/dconf/Writer/user",
                    interface: "ca.desrt.dconf.Writer", member: "Change",
                    arguments: [.array(.byte, blob.map(DBusValue.byte))], timeout: .seconds(120))
            }
        default:
            throw BenchFailure("unknown --system \(system); use settingsbus or dconf")
        }
        printLine("ready")
        _ = await standardInputLine()
        var acknowledged = 0
        var failed = 0
        let first = monotonicNanoseconds()
        let deadline = first + UInt64(seconds * 1e9)
        var last = first
        // Keys are numbered by acknowledged writes, so the check looks for exactly those; a failure ends
        // the writer. At most a million writes, and never past the deadline.
        while acknowledged < 1_000_000, monotonicNanoseconds() < deadline {
            do {
                try await write(acknowledged)
                acknowledged += 1
                last = monotonicNanoseconds()
            } catch {
                failed += 1
                FileHandle.standardError.write(Data("write \(acknowledged) failed: \(error)\n".utf8))
                break
            }
        }
        printLine("done \(acknowledged) \(failed) \(first) \(last)")
        await settings.close()
        await connection.close()
    }

    /// Writes a line to standard output at once (no buffering).
    static func printLine(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        bytes.withUnsafeBytes { write($0) }
    }

    /// Writes `<value> <stamp>` as a line, as ``printLine(_:)`` does, but made in place, without building
    /// strings: what a subscriber does after it has taken its time stamp delays the other subscribers on the
    /// same CPUs, so it does no more than the C probe's `printf`.
    static func printStamped(_ value: String, _ stamp: UInt64) {
        var value = value
        value.withUTF8 { text in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: text.count + 22) { line in
                _ = line.initialize(fromContentsOf: text)
                var end = text.count
                line[end] = UInt8(ascii: " ")
                end += 1
                var digits = stamp
                let first = end
                repeat {
                    line[end] = UInt8(ascii: "0") + UInt8(digits % 10)
                    digits /= 10
                    end += 1
                } while digits > 0
                line[first..<end].reverse()
                line[end] = UInt8(ascii: "\n")
                write(UnsafeRawBufferPointer(start: line.baseAddress, count: end + 1))
            }
        }
    }

    private static func write(_ buffer: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < buffer.count {
            let written = Glibc.write(1, buffer.baseAddress! + offset, buffer.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }

    /// Reads one line of standard input on a thread of its own, so that no task blocks in `read`.
    static func standardInputLine() async -> String? {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: readLine()) }
            thread.start()
        }
    }
}

/// A measurement that could not be taken, and why.
struct BenchFailure: Error, CustomStringConvertible {
    var description: String

    init(_ description: String) {
        self.description = description
    }
}
