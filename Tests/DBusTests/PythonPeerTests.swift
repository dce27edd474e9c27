// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBusTesting
import Testing
import TestMachine

/// The binding calls an object exported by a python3-dbus script (`Tests/Peers/echo_service.py`) and receives
/// its signals.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct PythonPeerTests {
    static let name: BusName = "org.example.Py"
    static let path: ObjectPath = "/org/example/Py"
    static let interface: InterfaceName = "org.example.Py1"

    /// Starts the script on `bus`, waits for its ready line and runs `body` with it; the script is ended after.
    func withPythonPeer(
        on bus: TestBus, _ body: (_ peer: RunningProcess, _ unique: String) async throws -> Void
    ) async throws {
        let peer = try RunningProcess.start(
            Peers.python, [Peers.script("echo_service.py"), Self.name.rawValue], environment: bus.environment)
        do {
            let ready = try await peer.nextLine()
            guard let ready, ready.hasPrefix("READY :") else {
                throw PeerFailure(
                    description: "echo_service.py did not start: \(ready ?? "no output"), \(await peer.standardError())")
            }
            try await body(peer, String(ready.dropFirst("READY ".count)))
        } catch {
            await peer.terminate()
            throw error
        }
        peer.closeInput()
        #expect(await peer.waitForExit() == 0)
    }

    func call(
        _ connection: DBusConnection, _ member: MemberName, _ arguments: [DBusValue] = []
    ) async throws -> [DBusValue] {
        try await connection.call(
            destination: Self.name, path: Self.path, interface: Self.interface, member: member, arguments: arguments)
    }

    @Test func repliesArriveFromThePythonObject() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            try await withPythonPeer(on: bus) { (_: RunningProcess, unique: String) async throws in
                #expect(try await connection.nameOwner(of: Self.name)?.rawValue == unique)
                #expect(try await call(connection, "Add", [.int32(40), .int32(2)]) == [.int32(42)])
                #expect(
                    try await call(connection, "Split", [.string("a,b,ç")])
                        == [.array(.string, [.string("a"), .string("b"), .string("ç")])])
                let values: [DBusValue] = [
                    .variant(.uint64(.max)),
                    .variant(.string("grüße")),
                    .variant(.array(.int16, [.int16(-1), .int16(.min)])),
                    .variant(.structure([.byte(1), .boolean(true), .objectPath("/a/b")])),
                    .variant(.dictionary(key: .string, value: .variant, [.init(key: .string("k"), value: .variant(.double(0.5)))])),
                ]
                for value in values {
                    #expect(try await call(connection, "Echo", [value]) == [value])
                }
            }
            await connection.close()
        }
    }

    @Test func errorReplyKeepsThePythonErrorName() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            try await withPythonPeer(on: bus) { (_: RunningProcess, _: String) async throws in
                let error = await #expect(throws: DBusError.self) { try await call(connection, "Fail") }
                #expect(error?.name.rawValue == "org.example.Py1.Error.Custom")
                #expect(error?.message == "the python peer failed on purpose")
                let wrong = await #expect(throws: DBusError.self) { try await call(connection, "Add", [.string("x")]) }
                // dbus-python names the Python exception that the unpacking of the arguments raised.
                #expect(wrong?.name.rawValue == "org.freedesktop.DBus.Python.TypeError", "\(String(describing: wrong))")
                let unknown = await #expect(throws: DBusError.self) { try await call(connection, "Nope") }
                #expect(unknown?.name == .unknownMethod)
            }
            await connection.close()
        }
    }

    @Test func signalFromThePythonPeerReachesAStream() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            try await withPythonPeer(on: bus) { (_: RunningProcess, unique: String) async throws in
                // Given a stream for the script's signal, restricted to the owner of its name.
                let stream = try await connection.signals(
                    matching: MatchRule(sender: Self.name, interface: Self.interface, member: "Pinged"))
                let watchdog = closing(connection)
                // When the script emits it twice.
                _ = try await call(connection, "Emit", [.string("hello")])
                _ = try await call(connection, "Emit", [.string("wörld")])
                // Then the stream yields both, in order, from the script's connection.
                var iterator = stream.makeAsyncIterator()
                let first = try #require(await iterator.next())
                let second = try #require(await iterator.next())
                watchdog.cancel()
                #expect(first.sender?.rawValue == unique)
                #expect(first.path == Self.path)
                #expect(first.body == [.string("hello"), .uint32(5)])
                #expect(second.body == [.string("wörld"), .uint32(5)])
            }
            await connection.close()
        }
    }
}
