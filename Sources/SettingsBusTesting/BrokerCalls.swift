// SPDX-License-Identifier: Apache-2.0

public import DBus

extension DBusConnection {
    /// Calls a method of the broker's settings interface (`io.github.settingsbus.Settings1`).
    public func settings(_ member: MemberName, _ arguments: [DBusValue] = []) async throws -> [DBusValue] {
        try await call(
            destination: TestBroker.busName, path: "/io/github/settingsbus/Settings1",
            interface: "io.github.settingsbus.Settings1", member: member, arguments: arguments)
    }

    /// The broker's `Serial` property: the serial of its last commit.
    ///
    /// - Throws: ``TestProcess/Failure`` when the property is not a `uint64`.
    public func brokerSerial() async throws -> UInt64 {
        let reply = try await call(
            destination: TestBroker.busName, path: "/io/github/settingsbus/Settings1",
            interface: "org.freedesktop.DBus.Properties", member: "Get",
            arguments: [.string("io.github.settingsbus.Settings1"), .string("Serial")])
        guard case .variant(.uint64(let serial))? = reply.first else {
            throw TestProcess.Failure(description: "Serial is not a uint64: \(reply)")
        }
        return serial
    }
}
