// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// A damaged store file is never replaced silently: the broker moves it aside under a dated name, logs an
/// error naming the files, restores the last good backup (or starts empty), reports it in `Status`, and
/// serves on, so it never exits into a restart loop.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct StoreRecoveryTests {
    /// The ways a store file is found damaged.
    enum Damage: String, CaseIterable, Sendable, CustomStringConvertible {
        case truncated
        case zeroLength = "zero-length"
        case garbage
        case directory

        var description: String { rawValue }

        /// Damages the store file (the broker is stopped, so it has no `-wal`).
        func apply(to path: String) throws {
            switch self {
            case .truncated:
                let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
                try #require(truncate(path, off_t(size / 2)) == 0)
            case .zeroLength:
                try Data().write(to: URL(fileURLWithPath: path))
            case .garbage:
                try Data((0..<20_000).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: path))
            case .directory:
                try FileManager.default.removeItem(atPath: path)
                try FileManager.default.createDirectory(atPath: path + "/inside", withIntermediateDirectories: true)
            }
        }
    }

    static let keyCount = 300

    static func key(_ index: Int) -> String { "/test/recovery/d\(index / 100)/k\(index)" }

    /// Stores `keyCount` keys with a broker and stops it cleanly: its shutdown backup then holds them.
    ///
    /// - Returns: the last serial.
    static func populate(_ bus: TestBus, _ directory: StoreDirectory) async throws -> UInt64 {
        let broker = try await TestBroker.start(on: bus, storePath: directory.store)
        let connection = try await bus.connect()
        let calls = Broker(connection: connection)
        let entries = (0..<keyCount).map { index in
            DBusDictEntry(key: .string(key(index)), value: .variant(.int32(Int32(index))))
        }
        let reply = try await calls.call(
            "Apply",
            [.dictionary(key: .string, value: .variant, entries), .array(.string, []),
             .dictionary(key: .string, value: .variant, [])])
        let serial = try #require({ if case .uint64(let serial)? = reply.first { serial } else { nil } }())
        await connection.close()
        #expect(await broker.stop() == 0)
        return serial
    }

    /// Checks that every populated key is served with its value.
    static func expectAllKeys(_ calls: Broker) async throws {
        let reply = try await calls.call("ReadTree", [.string("/test/recovery/")])
        guard case .dictionary(_, _, let entries)? = reply.first else {
            Issue.record("ReadTree replied \(reply)")
            return
        }
        #expect(entries.count == keyCount)
        for index in [0, 1, keyCount / 2, keyCount - 1] {
            #expect(try await calls.get(key(index)) == .int32(Int32(index)))
        }
    }

    @Test(arguments: Damage.allCases)
    func aDamagedStoreIsMovedAsideAndRestoredFromTheBackup(_ damage: Damage) async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            // Given: a store of 300 keys, stopped cleanly (so its backup holds them), then damaged.
            let serial = try await Self.populate(bus, directory)
            #expect(FileManager.default.fileExists(atPath: directory.backup))
            try damage.apply(to: directory.store)
            let damagedBytes = damage == .directory ? nil : FileManager.default.contents(atPath: directory.store)

            // When: a broker starts on it.
            let broker = try await TestBroker.start(on: bus, storePath: directory.store)
            let connection = try await bus.connect()
            let calls = Broker(connection: connection)

            // Then: it serves the backup's values, reports the recovery, and kept the damaged file as it was.
            let status = try await calls.status()
            #expect(status["health"] == .string("recovered-from-backup"), "\(status)")
            #expect(status["writable"] == .boolean(true))
            #expect(status["backup"] == .string(directory.backup))
            #expect(status["keys"] == .uint32(UInt32(Self.keyCount)))
            if case .uint64(let restored)? = status["serial"] { #expect(restored >= serial) }
            let aside = try #require(status["damaged-file"]?.text, "\(status)")
            #expect(aside.hasPrefix(directory.store + ".damaged-"))
            #expect(directory.damagedFiles() == [(aside as NSString).lastPathComponent])
            if let damagedBytes {
                #expect(FileManager.default.contents(atPath: aside) == damagedBytes)
            } else {
                #expect(FileManager.default.fileExists(atPath: aside + "/inside"))
            }
            try await Self.expectAllKeys(calls)
            let log = broker.log()
            let errorLine = try #require(log.split(separator: "\n").first { $0.hasPrefix("<3>") }, "\(log)")
            #expect(errorLine.contains(aside) && errorLine.contains(directory.backup))

            // And: writes work, and the next start finds a healthy store.
            let written = try await calls.set("/test/recovery/after", .string("written after recovery"))
            await connection.close()
            #expect(await broker.stop() == 0)
            let next = try await TestBroker.start(on: bus, storePath: directory.store)
            let again = try await bus.connect()
            let nextStatus = try await Broker(connection: again).status()
            #expect(nextStatus["health"] == .string("ok"))
            #expect(nextStatus["serial"] == .uint64(written))
            #expect(try await Broker(connection: again).get("/test/recovery/after") == .string("written after recovery"))
            await again.close()
            #expect(await next.stop() == 0)
        }
    }

    @Test func withoutABackupADamagedStoreIsKeptAsideAndTheBrokerStartsEmpty() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            // Given: garbage where the store should be, and no backup.
            try Damage.garbage.apply(to: directory.store)
            let garbage = FileManager.default.contents(atPath: directory.store)

            // When: a broker starts on it.
            let broker = try await TestBroker.start(on: bus, storePath: directory.store)
            let connection = try await bus.connect()
            let calls = Broker(connection: connection)

            // Then: it starts empty and writable, with the garbage kept aside byte for byte.
            let status = try await calls.status()
            #expect(status["health"] == .string("recovered-empty"), "\(status)")
            #expect(status["keys"] == .uint32(0))
            let aside = try #require(status["damaged-file"]?.text)
            #expect(FileManager.default.contents(atPath: aside) == garbage)
            #expect(try await calls.set("/test/recovery/fresh", .int32(1)) >= 1)
            #expect(broker.log().contains("<3>the settings store \(directory.store) was damaged: it was moved to \(aside)"))
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aDamagedBackupIsMovedAsideToo() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            // Given: a store and its backup, both damaged.
            _ = try await Self.populate(bus, directory)
            try Damage.garbage.apply(to: directory.store)
            try Damage.truncated.apply(to: directory.backup)
            let truncatedBackup = FileManager.default.contents(atPath: directory.backup)

            // When: a broker starts.
            let broker = try await TestBroker.start(on: bus, storePath: directory.store)
            let connection = try await bus.connect()
            let status = try await Broker(connection: connection).status()

            // Then: both are kept aside, and the store starts empty.
            #expect(status["health"] == .string("recovered-empty"), "\(status)")
            let asideBackup = try #require(status["damaged-backup"]?.text)
            #expect(asideBackup.hasPrefix(directory.backup + ".damaged-"))
            #expect(FileManager.default.contents(atPath: asideBackup) == truncatedBackup)
            #expect(directory.damagedFiles().count == 2)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aMissingStoreIsRestoredFromItsBackup() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            // Given: a store whose file is gone, while its backup is there.
            let serial = try await Self.populate(bus, directory)
            try FileManager.default.removeItem(atPath: directory.store)

            // When: a broker starts.
            let broker = try await TestBroker.start(on: bus, storePath: directory.store)
            let connection = try await bus.connect()
            let calls = Broker(connection: connection)

            // Then: the backup's values are back, the serial did not go back, and nothing was moved aside.
            let status = try await calls.status()
            #expect(status["health"] == .string("recovered-from-backup"), "\(status)")
            #expect(status["damaged-file"] == nil)
            #expect(status["serial"] == .uint64(serial))
            try await Self.expectAllKeys(calls)
            // And: the view apps read (decision 0037) is written again from the restored store.
            try await broker.waitForTheView()
            let last = Self.key(Self.keyCount - 1)
            let directory = String(last[...last.lastIndex(of: "/")!])
            let file = try #require(View1.read(broker.viewFolder + "/" + View1.fileName(of: directory)))
            let held = try #require(View1.Directory(file.message))
            #expect(held.serial == serial)
            #expect(held.user.count == (0..<Self.keyCount).filter { Self.key($0).hasPrefix(directory) }.count)
            #expect(held.user[last] == .int32(Int32(Self.keyCount - 1)))
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
