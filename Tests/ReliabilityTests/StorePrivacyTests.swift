// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The store holds the values of secret keys: its files are its user's alone (`0600`, a new folder `0700`),
/// and a store that others could read is made private when the broker opens it.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct StorePrivacyTests {
    static func mode(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
    }

    @Test func aNewStoreAndItsFolderAreTheUsersAlone() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let folder = directory.url.appendingPathComponent("settingsbus").path
        let store = folder + "/settings.db"
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, storePath: store)
            let calls = Broker(connection: try await bus.connect())
            _ = try await calls.set("/test/private/a", .string("secret"))
            #expect(Self.mode(folder) == 0o700)
            for file in [store, store + "-wal", store + ".lock"] {
                #expect(Self.mode(file) == 0o600, "\(file): \(String(Self.mode(file) ?? 0, radix: 8))")
            }
            await calls.connection.close()
            #expect(await broker.stop() == 0)
            // The backup written at shutdown too.
            #expect(Self.mode(store + ".backup") == 0o600)
        }
    }

    @Test func aStoreOthersCouldReadIsMadePrivateAtStart() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus, storePath: directory.store)
            let calls = Broker(connection: try await bus.connect())
            _ = try await calls.set("/test/private/a", .string("secret"))
            await calls.connection.close()
            #expect(await broker.stop() == 0)
            // Given: a store and backup readable by everyone, as an older broker made them.
            for file in [directory.store, directory.backup] { chmod(file, 0o644) }

            // When: the broker starts on it. Then: they are its user's alone.
            broker = try await TestBroker.start(on: bus, storePath: directory.store)
            #expect(Self.mode(directory.store) == 0o600)
            #expect(Self.mode(directory.backup) == 0o600)
            #expect(await broker.stop() == 0)
        }
    }
}
