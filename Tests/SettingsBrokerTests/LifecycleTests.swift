// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// How the broker starts and stops: restarts keep the store, D-Bus activation starts it on the first call,
/// SIGTERM loses no acknowledged write, and a second broker on a bus is refused.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct LifecycleTests {
    @Test func valuesAndSchemasSurviveARestart() async throws {
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus)
            let registrations = [
                try await Peers.gdbus(bus, "Register", ["/test/keep/volume", "d", "<0.5>", "{'summary': <'Volume'>, 'range': <(0.0, 1.0)>}"]),
                try await Peers.gdbus(bus, "Register", ["/test/keep/theme", "s", "<'light'>", "{'choices': <['light', 'dark']>}"]),
                try await Peers.dbusSend(bus, "SetFromString", ["string:/test/keep/list", "string:[('a', <1>)]"]),
                try await Peers.dbusSend(bus, "Set", ["string:/test/keep/volume", "variant:double:0.25"]),
                try await Peers.dbusSend(bus, "Set", ["string:/test/keep/gone", "variant:int32:1"]),
                try await Peers.dbusSend(bus, "Reset", ["string:/test/keep/gone"]),
            ]
            for result in registrations { #expect(result.status == 0, "\(result.stderr)") }
            for index in 0..<20 {
                #expect(try await Peers.dbusSend(bus, "Set", ["string:/test/keep/k\(index)", "variant:int32:\(index)"]).status == 0)
            }
            let connection = try await bus.connect()
            let tree = try await connection.settings("ReadTree", [.string("/test/keep/")])
            let serial = try await connection.brokerSerial()

            // When: SIGTERM (the broker exits 0), then a new broker on the same store.
            let restarted = try await broker.restart()
            #expect(restarted.exitStatus == 0)
            broker = restarted.broker

            // Then: every value, the serial and the schemas are there.
            #expect(try await connection.settings("ReadTree", [.string("/test/keep/")]) == tree)
            #expect(try await connection.brokerSerial() == serial)
            #expect(tree.first?["/test/keep/k19"] == .int32(19))
            #expect(tree.first?["/test/keep/gone"] == nil)
            let wrong = try await Peers.dbusSend(bus, "Set", ["string:/test/keep/volume", "variant:string:loud"])
            #expect(ReportedError(wrong)?.name == "io.github.settingsbus.Settings1.Error.TypeMismatch", "\(wrong.stderr)")
            let outside = try await Peers.dbusSend(bus, "Set", ["string:/test/keep/theme", "variant:string:blue"])
            #expect(ReportedError(outside)?.name == "io.github.settingsbus.Settings1.Error.OutOfRange", "\(outside.stderr)")
            let described = try await connection.settings("Describe", [.string("/test/keep/volume")]).first
            #expect(described?["summary"] == .string("Volume"))
            #expect(described?["range"] == .structure([.double(0), .double(1)]))
            #expect(described?["value"] == .double(0.25))
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func theFirstCallStartsTheBrokerByDBusActivation() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            // Given: a bus whose service directory holds the broker's activation file, and no broker.
            try bus.installBrokerService(storePath: directory.url.appendingPathComponent("settings.db").path)
            let connection = try await bus.connect()
            #expect(try await connection.nameOwner(of: TestBroker.busName) == nil)

            // When: the first call, from dbus-send.
            let set = try await Peers.dbusSend(bus, "Set", ["string:/act/key", "variant:int32:7"])
            do {
                // Then: the bus started the broker, which answered it.
                #expect(set.status == 0, "\(set.stderr)")
                let pid = try await connection.processID(of: TestBroker.busName)
                #expect(pid != bus.daemon.pid && pid != ProcessInfo.processInfo.processIdentifier)
                #expect(try await Peers.gdbus(bus, "Get", ["/act/key"]).stdout.contains("(<7>,)"))
                try await Self.endActivatedBroker(pid, on: connection)

                // And: the next call starts it again, on the same store.
                let read = try await Peers.gdbus(bus, "Get", ["/act/key"])
                #expect(read.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(<7>,)", "\(read.stderr)")
                let second = try await connection.processID(of: TestBroker.busName)
                #expect(second != pid)
                try await Self.endActivatedBroker(second, on: connection)
            } catch {
                // A broker that is still there is ended all the same.
                if let pid = try? await connection.processID(of: TestBroker.busName) {
                    try? await Self.endActivatedBroker(pid, on: connection)
                }
                throw error
            }
            await connection.close()
        }
    }

    /// Ends a broker that the bus daemon started, by its pid (SIGTERM), and waits until it has exited and its
    /// name has no owner.
    static func endActivatedBroker(_ pid: Int32, on connection: DBusConnection) async throws {
        let owners = Collector(try await connection.nameOwnerChanges(of: TestBroker.busName))
        defer { owners.stop() }
        let ended = try await TestProcess.run(Peers.pythonPath, [Peers.script("end_process.py"), "\(pid)", "TERM"])
        #expect(ended.stdout == "exited\n", "the activated broker \(pid) did not exit: \(ended.stdout) \(ended.stderr)")
        if try await connection.nameOwner(of: TestBroker.busName) != nil {
            _ = try await owners.next(where: { $0.newOwner == nil })
        }
    }

    @Test func sigtermExitsZeroAndKeepsEveryAcknowledgedWrite() async throws {
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus)
            // Given: four writers, each setting its own key to 1, 2, 3, … as fast as the broker answers.
            let writers = 4
            let acknowledgements = Mailbox<Int>()
            let tasks = try await (0..<writers).asyncMap { index in
                let connection = try await bus.connect()
                return Task { () -> (acknowledged: Int64, error: String?) in
                    var acknowledged: Int64 = 0
                    var failure: String?
                    while failure == nil {
                        do {
                            _ = try await connection.settings(
                                "Set", [.string("/term/writer-\(index)"), .variant(.int64(acknowledged + 1))])
                            acknowledged += 1
                            acknowledgements.push(index)
                        } catch {
                            failure = "\(error)"
                        }
                    }
                    await connection.close()
                    return (acknowledged, failure)
                }
            }
            var counts = [Int](repeating: 0, count: writers)
            while counts.min()! < 10 {
                guard case .element(let index) = await acknowledgements.next(timeLimit: .seconds(30)) else {
                    throw PeerFailure("the writers made no progress: \(counts)")
                }
                counts[index] += 1
            }

            // When: SIGTERM while the writes go on, then a new broker on the same store.
            let restarted = try await broker.restart()
            broker = restarted.broker
            for task in tasks { task.cancel() }
            var results: [(acknowledged: Int64, error: String?)] = []
            for task in tasks { results.append(await task.value) }

            // Then: the broker exited 0, and every write it acknowledged is in the store.
            #expect(restarted.exitStatus == 0, "\(broker.log())")
            let connection = try await bus.connect()
            for (index, result) in results.enumerated() {
                let stored = try await connection.settings("Get", [.string("/term/writer-\(index)")])
                guard case .variant(.int64(let value))? = stored.first else {
                    Issue.record("writer \(index) has no value: \(stored)")
                    continue
                }
                #expect(value >= result.acknowledged, "writer \(index): acknowledged \(result.acknowledged), stored \(value)")
            }
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A session that ends without SIGTERM to its services: the broker notices the lost bus, closes its store
    /// and exits 3, and every acknowledged write is in the store.
    @Test func aBrokerWhoseBusDiesExitsAndKeepsEveryAcknowledgedWrite() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let store = directory.url.appendingPathComponent("settings.db").path
        let bus = try await TestBus.start()
        let broker = try await TestBroker.start(on: bus, storePath: store)
        for index in 0..<10 {
            let set = try await Peers.dbusSend(bus, "Set", ["string:/lost/k\(index)", "variant:int32:\(index)"])
            #expect(set.status == 0, "\(set.stderr)")
        }

        // When: the bus daemon is killed.
        await bus.kill()

        // Then: the broker exits on its own, with status 3 and a log line saying why.
        let status = await broker.process.waitForExit()
        #expect(status == 3, "\(broker.log())")
        #expect(broker.log().contains("the connection to the"), "\(broker.log())")
        // And: a broker on a new bus serves every acknowledged write.
        try await withTestBus { next in
            let restarted = try await TestBroker.start(on: next, storePath: store)
            let connection = try await next.connect()
            let tree = try await connection.settings("ReadTree", [.string("/lost/")])
            for index in 0..<10 { #expect(tree.first?["/lost/k\(index)"] == .int32(Int32(index))) }
            await connection.close()
            #expect(await restarted.stop() == 0)
        }
        await broker.stop()
    }

    @Test func aSecondBrokerOnTheSameBusExitsSayingTheNameIsOwned() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let second = try await TestProcess.run(
                try TestBroker.executablePath(),
                ["--bus", bus.address, "--store", directory.url.appendingPathComponent("s.db").path],
                timeLimit: .seconds(30))
            #expect(second.status == 1)
            #expect(second.stderr.contains("io.github.settingsbus.Settings1 is already owned"), "\(second.stderr)")
            // The first broker is undisturbed.
            let connection = try await bus.connect()
            #expect(try await connection.nameOwner(of: TestBroker.busName) == broker.uniqueName)
            #expect(try await connection.processID(of: TestBroker.busName) == broker.pid)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}

/// A temporary directory for a test's files, removed with ``remove()``.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("settingsbus-broker-test-\(UUID())")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

extension Sequence {
    /// The results of an asynchronous transform of each element, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async throws -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
