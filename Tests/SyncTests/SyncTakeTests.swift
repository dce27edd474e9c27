// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import SyncProtocol
import Testing
import TestMachine

/// The sync process's work never holds up a local write: a `Take` of a queue of large values is read in
/// slices, between which local commits go on, and calls left on a channel that closed are dropped.
@Suite(.sharingTheMachine, .timeLimit(.minutes(5)))
struct SyncTakeTests {
    /// The longest a local `Set` may take, round trip on a private bus and commit included, while the sync
    /// process takes: the time of one slice of the queue (about 1 MiB of values) and a commit, with room for a
    /// loaded machine. Without slices, a `Set` waited for a whole `Take` (seconds).
    static let bound: Duration = .milliseconds(300)
    /// Queued values: 40 of 1,000,000 bytes, 40 MB in the queue, a `Take` answers about 8 MiB of them.
    static let count = 40

    @Test func aLocalWriteWaitsForNoTakeAndNothingIsDoneForAChannelThatClosed() async throws {
        let folder = try storeFolder()
        chmod(folder.path, 0o755)
        defer { try? FileManager.default.removeItem(at: folder) }
        let socket = try ListeningSocket(path: folder.appendingPathComponent("sync.socket").path)
        defer { socket.close() }
        let machine = try await startMachine(
            "alpha", stores: folder,
            arguments: [
                "--sync-url", "postgres://me@localhost/settings", "--sync-dir", "/sync/", "--sync-socket", socket.path,
                "--machine-id", "id-alpha", "--machine-name", "alpha",
            ])
        defer { Task { await stopMachines([machine]) } }
        let connection = try await machine.bus.connect()
        defer { Task { await connection.close() } }
        func set(_ key: String, _ value: DBusValue) async throws -> Duration {
            let began = ContinuousClock.now
            _ = try await connection.call(
                destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
                interface: SettingsBusNames.interface, member: "Set", arguments: [.string(key), .variant(value)],
                timeout: .seconds(60))
            return ContinuousClock.now - began
        }
        // Given: 40 MB queued for the database.
        for index in 0..<Self.count {
            let letter = Character(UnicodeScalar(UInt8(ascii: "a") + UInt8(index % 26)))
            _ = try await set("/sync/big/k\(index)", .string(String(repeating: letter, count: 1_000_000)))
        }
        var channel = MessageChannel(descriptor: try await socket.accept(within: .seconds(20)), label: "test")
        _ = try await channel.call(SyncCall.hello, [.uint32(SyncCall.version)])

        // When: the sync process takes, three times, while a local key is written over and over.
        let finished = Locked(false)
        let taking = Task { [channel] in
            defer { finished.withLock { $0 = true } }
            var sizes: [Int] = []
            for _ in 0..<3 {
                let taken = try await channel.call(SyncCall.take, [.uint32(1000)])
                guard case .array(_, let changes) = taken.first else { throw SyncTestFailure(description: "\(taken)") }
                sizes.append(changes.count)
            }
            return sizes
        }
        var during: [Duration] = []
        var round = 0
        repeat {
            during.append(try await set("/local/counter", .int32(Int32(round))))
            round += 1
        } while !finished.withLock({ $0 }) && round < 10_000
        let sizes = try await taking.value

        // Then: each Take answered about 8 MiB (8 values), and no local write waited longer than the bound.
        #expect(sizes == [8, 8, 8], "\(sizes)")
        let slowest = during.max() ?? .zero
        print("local Set during Takes: \(during.count) writes, slowest \(slowest), median \(during.sorted()[during.count / 2])")
        #expect(during.count > 3, "the Takes ended before the local writes could be measured: \(during)")
        #expect(slowest < Self.bound, "a local Set took \(slowest) during a Take: \(during)")

        // When: the sync process sends ten Takes and, once the first is answered, closes its channel.
        let answered = Mailbox<Void>()
        let calls = (0..<10).map { _ in
            Task { [channel] in
                _ = try? await channel.call(SyncCall.take, [.uint32(1000)])
                answered.push(())
            }
        }
        guard case .element = await answered.next(timeLimit: .seconds(60)) else {
            throw SyncTestFailure(description: "no Take was answered within 60 s")
        }
        channel.close()
        for call in calls { await call.value }
        let closed = ContinuousClock.now
        // Then: a local write right after waits no longer than the bound, and neither do those after it until
        // the broker reports the channel closed (it dropped the calls left on it).
        var after: [Duration] = []
        while true {
            after.append(try await set("/local/counter", .int32(Int32(round))))
            round += 1
            if try await statusField(machine, "sync-state") == "<'error'>" { break }
            guard ContinuousClock.now - closed < .seconds(30) else {
                throw SyncTestFailure(
                    description: "the broker did not see the channel closed within 30 s; local Sets meanwhile: \(after)")
            }
        }
        let noticed = ContinuousClock.now - closed
        let slowestAfter = after.max() ?? .zero
        print("after the channel closed: \(after.count) writes, slowest \(slowestAfter); closed noticed after \(noticed)")
        #expect(slowestAfter < Self.bound, "a local Set took \(slowestAfter) after the channel closed: \(after)")
        #expect(noticed < .seconds(5), "the broker saw the channel closed only after \(noticed)")
        let error = try #require(try await statusField(machine, "sync-error"))
        #expect(error.contains("closed"), "\(error)")

        // And: the queue is whole, for the next sync process.
        channel = MessageChannel(descriptor: try await socket.accept(within: .seconds(20)), label: "test")
        _ = try await channel.call(SyncCall.hello, [.uint32(SyncCall.version)])
        #expect(try await statusField(machine, "sync-queued") == "<uint64 \(Self.count)>")
        channel.close()
    }
}
