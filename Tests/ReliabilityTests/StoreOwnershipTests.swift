// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// One store, one owner: two brokers racing on a new store, two brokers on two buses, a store removed or
/// replaced under a running broker, and a store under a missing home folder.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct StoreOwnershipTests {
    static let storeFailure = "io.github.settingsbus.Settings1.Error.StoreFailure"

    /// Starts the broker executable without waiting for anything; its standard error goes to `log`.
    static func spawnBroker(bus: TestBus, store: String, log: String) throws -> ChildProcess {
        let fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TestFailure("cannot create \(log)") }
        defer { close(fd) }
        return try ChildProcess.spawn(
            try TestBroker.executablePath(), ["--bus", bus.address, "--store", store],
            environment: ProcessInfo.processInfo.environment, stderr: fd)
    }

    @Test func twoBrokersStartedAtOnceOnANewStoreLeaveOneHealthyStore() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        // A store whose folder does not exist yet.
        let store = directory.url.appendingPathComponent("settingsbus/settings.db").path
        try await withTestBus { bus in
            let connection = try await bus.connect()
            var rule = MatchRule(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
            rule.arguments[0] = TestBroker.busName.rawValue
            let owners = Collector(try await connection.signals(matching: rule))

            // When: two brokers start at the same moment on it.
            let logs = [directory.path + "/a.log", directory.path + "/b.log"]
            let brokers = try logs.map { try Self.spawnBroker(bus: bus, store: store, log: $0) }
            let exits = Mailbox<(index: Int, status: Int32)>()
            for (index, broker) in brokers.enumerated() {
                Task { exits.push((index, await broker.waitForExit())) }
            }

            // Then: one exits 1, saying why; the other takes the name.
            guard case .element(let loser) = await exits.next(timeLimit: .seconds(60)) else {
                Issue.record("neither broker exited")
                for broker in brokers { broker.signal(SIGKILL) }
                return
            }
            let winner = brokers[1 - loser.index]
            let said = (try? String(contentsOfFile: logs[loser.index], encoding: .utf8)) ?? ""
            #expect(loser.status == 1, "\(said)")
            #expect(said.contains("in use by another settings-broker") || said.contains("is already owned"), "\(said)")
            _ = try await owners.next(timeLimit: .seconds(30))
            let reply = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetConnectionUnixProcessID", arguments: [.string(TestBroker.busName.rawValue)])
            #expect(reply == [.uint32(UInt32(winner.pid))])

            // And: the survivor's store is healthy and takes writes.
            let calls = Broker(connection: connection)
            #expect(try await calls.set("/test/race/a", .int32(1)) > 0)
            let status = try await calls.status()
            #expect(status["health"] == .string("ok"), "\(status)")
            #expect(status["writable"] == .boolean(true))
            winner.signal(SIGTERM)
            #expect(await winner.waitForExit() == 0)
            owners.stop()
            await connection.close()
        }
    }

    @Test func aSecondBrokerOnAnotherBusIsRefusedTheStoreAndNamesTheFirst() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let first = try await TestBus.start()
        let second = try await TestBus.start()
        let broker = try await TestBroker.start(on: first, storePath: directory.store)
        let calls = Broker(connection: try await first.connect())
        _ = try await calls.set("/test/two/a", .string("a29"))

        // When: a broker for the same store starts on another bus (another login session).
        let refused = try await TestProcess.run(
            try TestBroker.executablePath(), ["--bus", second.address, "--store", directory.store],
            timeLimit: .seconds(30))

        // Then: it exits 1 naming the broker that holds the store, which goes on serving.
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("is in use by another settings-broker (pid \(broker.pid))"), "\(refused.stderr)")
        #expect(try await calls.get("/test/two/a") == .string("a29"))
        #expect(try await calls.set("/test/two/a", .string("a30")) > 0)
        await calls.connection.close()
        #expect(await broker.stop() == 0)
        // And: once the first has stopped, the store is free.
        let next = try await TestBroker.start(on: second, storePath: directory.store)
        let nextCalls = Broker(connection: try await second.connect())
        #expect(try await nextCalls.get("/test/two/a") == .string("a30"))
        await nextCalls.connection.close()
        #expect(await next.stop() == 0)
        await first.stop()
        await second.stop()
    }

    @Test(arguments: ["folder", "file", "replaced"])
    func aStoreRemovedOrReplacedUnderTheBrokerIsWrittenBackWithEveryAcknowledgedWrite(_ how: String) async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let folder = directory.url.appendingPathComponent("settingsbus").path
        let store = folder + "/settings.db"
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, storePath: store)
            let calls = Broker(connection: try await bus.connect())
            for index in 0..<5 { _ = try await calls.set("/test/gone/before\(index)", .int32(Int32(index))) }

            // When: the store goes away under the broker.
            switch how {
            case "folder": try FileManager.default.removeItem(atPath: folder)
            case "file": try FileManager.default.removeItem(atPath: store)
            default:
                try FileManager.default.removeItem(atPath: store)
                try Data("another file".utf8).write(to: URL(fileURLWithPath: store))
            }

            // Then: the next write is acknowledged, and Status says what happened.
            _ = try await calls.set("/test/gone/after", .string("kept"))
            let status = try await calls.status()
            let restored = status["restored"]?.text ?? ""
            #expect(restored.contains(how == "replaced" ? "was replaced by another file" : "was removed"), "\(status)")
            if how == "replaced" {
                let aside = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".replaced-") }
                #expect(aside.count == 1, "\(aside)")
                if let name = aside.first {
                    #expect(FileManager.default.contents(atPath: folder + "/" + name) == Data("another file".utf8))
                }
            }
            #expect(FileManager.default.fileExists(atPath: store))
            #expect(FileManager.default.fileExists(atPath: StoreLockPath.of(store)))
            await calls.connection.close()
            #expect(await broker.stop() == 0)

            // And: a broker started afterwards on the path has every acknowledged write.
            let next = try await TestBroker.start(on: bus, storePath: store)
            let nextCalls = Broker(connection: try await bus.connect())
            for index in 0..<5 { #expect(try await nextCalls.get("/test/gone/before\(index)") == .int32(Int32(index))) }
            #expect(try await nextCalls.get("/test/gone/after") == .string("kept"))
            await nextCalls.connection.close()
            #expect(await next.stop() == 0)
        }
    }

    @Test func aStoreUnderAMissingHomeFolderIsNotMadeButServedReadOnly() async throws {
        let directory = try StoreDirectory()
        defer { directory.remove() }
        let home = directory.url.appendingPathComponent("home-that-is-not-there").path
        let store = home + "/.config/settingsbus/settings.db"
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, storePath: store)
            let calls = Broker(connection: try await bus.connect())
            let status = try await calls.status()
            #expect(status["health"] == .string("read-only"), "\(status)")
            #expect(status["problem"]?.text?.contains("does not exist") == true, "\(status)")
            #expect(await calls.error(of: "Set", [.string("/test/home/a"), .variant(.int32(1))]) == Self.storeFailure)
            #expect(!FileManager.default.fileExists(atPath: home))
            await calls.connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}

/// The lock file beside a store (`<store>.lock`).
enum StoreLockPath {
    static func of(_ store: String) -> String { store + ".lock" }
}
