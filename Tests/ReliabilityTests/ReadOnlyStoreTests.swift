// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// A store that cannot be written keeps the broker up: it serves what it could read, read-only, refuses
/// writes with `StoreFailure`, and says why in `Status`. A full disk fails writes while reads go on.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct ReadOnlyStoreTests {
    static let storeFailure = "io.github.settingsbus.Settings1.Error.StoreFailure"

    /// Whether the broker process is still running.
    static func isRunning(_ broker: TestBroker) -> Bool {
        kill(broker.pid, 0) == 0
    }

    @Test func aStoreWhoseDirectoryCannotBeCreatedIsServedReadOnly() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        // Given: the store's parent directory would have to be made where a file is.
        let file = directory.url.appendingPathComponent("file").path
        try Data("a file, not a directory".utf8).write(to: URL(fileURLWithPath: file))
        let store = file + "/settingsbus/settings.db"

        try await withTestBus { bus in
            // When: a broker starts on that path.
            let broker = try await TestBroker.start(on: bus, storePath: store)
            let connection = try await bus.connect()
            let calls = Broker(connection: connection)

            // Then: it serves, read-only and empty, and says why.
            let status = try await calls.status()
            #expect(status["health"] == .string("read-only"), "\(status)")
            #expect(status["writable"] == .boolean(false))
            #expect(status["source"] == .string("empty"))
            #expect(status["problem"]?.text?.contains("\(file) is a file, not a directory") == true)
            #expect(await calls.error(of: "Set", [.string("/test/ro/a"), .variant(.int32(1))]) == Self.storeFailure)
            #expect(await calls.error(of: "Get", [.string("/test/ro/a")]) == "io.github.settingsbus.Settings1.Error.UnknownKey")
            #expect(Self.isRunning(broker))
            #expect(broker.log().contains("<3>the settings store \(store) cannot be written"))
            await connection.close()
            #expect(await broker.stop() == 0)
            #expect(FileManager.default.contents(atPath: file) == Data("a file, not a directory".utf8))
        }
    }

    @Test(.enabled(if: Mounts.available, "needs root with mount rights (CAP_SYS_ADMIN) for a read-only tmpfs"))
    func aStoreOnAReadOnlyFileSystemIsServedReadOnly() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try Mounts.mountTmpfs(directory.path, size: "4m")
        defer { Mounts.unmount(directory.path) }

        try await withTestBus { bus in
            // Given: a store with a value, on a file system then remounted read-only.
            let first = try await TestBroker.start(on: bus, storePath: directory.store)
            let writer = try await bus.connect()
            let serial = try await Broker(connection: writer).set("/test/ro/kept", .string("before"))
            await writer.close()
            #expect(await first.stop() == 0)
            try Mounts.remountReadOnly(directory.path)

            // When: a broker starts on it.
            let broker = try await TestBroker.start(on: bus, storePath: directory.store)
            let connection = try await bus.connect()
            let calls = Broker(connection: connection)

            // Then: it serves the store's values read-only and refuses writes with StoreFailure.
            let status = try await calls.status()
            #expect(status["health"] == .string("read-only"), "\(status)")
            #expect(status["source"] == .string("store"))
            #expect(status["serial"] == .uint64(serial))
            #expect(try await calls.get("/test/ro/kept") == .string("before"))
            #expect(await calls.error(of: "Set", [.string("/test/ro/kept"), .variant(.string("after"))]) == Self.storeFailure)
            #expect(try await calls.get("/test/ro/kept") == .string("before"))
            #expect(directory.damagedFiles().isEmpty)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test(.enabled(if: Mounts.available, "needs root with mount rights (CAP_SYS_ADMIN) for a small tmpfs"))
    func aFullDiskFailsWritesWithStoreFailureWhileReadsGoOn() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try Mounts.mountTmpfs(directory.path, size: "2m")
        defer { Mounts.unmount(directory.path) }

        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, storePath: directory.store)
            let connection = try await bus.connect()
            let calls = Broker(connection: connection)
            _ = try await calls.set("/test/full/small", .int32(1))

            // Given: a disk filled up by another file.
            let ballast = directory.url.appendingPathComponent("ballast").path
            let fd = open(ballast, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            try #require(fd >= 0)
            let chunk = [UInt8](repeating: 0xA5, count: 16 * 1024)
            while write(fd, chunk, chunk.count) > 0 {}
            close(fd)

            // When: values are written until one fails.
            let big = String(repeating: "x", count: 64 * 1024)
            var failure: String?
            var accepted = 0
            for index in 0..<64 {
                failure = await calls.error(of: "Set", [.string("/test/full/big\(index)"), .variant(.string(big))])
                if failure != nil { break }
                accepted += 1
            }

            // Then: the write failed with StoreFailure, and the broker still serves reads.
            #expect(failure == Self.storeFailure, "after \(accepted) writes of 64 KiB")
            #expect(try await calls.get("/test/full/small") == .int32(1))
            #expect(try await calls.status()["health"] == .string("ok"))
            #expect(Self.isRunning(broker))

            // And: once there is room again, writes succeed and survive a restart.
            try FileManager.default.removeItem(atPath: ballast)
            let serial = try await calls.set("/test/full/small", .int32(2))
            await connection.close()
            #expect(await broker.stop() == 0)
            let next = try await TestBroker.start(on: bus, storePath: directory.store)
            let again = try await bus.connect()
            #expect(try await Broker(connection: again).get("/test/full/small") == .int32(2))
            let status = try await Broker(connection: again).status()
            #expect(status["health"] == .string("ok"))
            #expect(status["serial"] == .uint64(serial))
            await again.close()
            #expect(await next.stop() == 0)
        }
    }
}
