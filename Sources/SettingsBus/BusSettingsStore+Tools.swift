// SPDX-License-Identifier: Apache-2.0

package import DBus
package import SettingsModel

// MARK: - Calls for tools (package access: settingsctl, not apps)

extension BusSettingsStore {
    /// Calls a method of the broker's interface with its typed request (``SettingsModel/Settings1``), for tools
    /// that need one the typed API does not cover: `settingsctl get` calls `Get`, which fails with
    /// `UnknownKey` for a key without a value, where ``get(_:)`` returns the key's default.
    ///
    /// ```swift
    /// let value = try await settings.call(Settings1.GetRequest(key: key)).value
    /// ```
    ///
    /// - Returns: the method's reply.
    /// - Throws: ``SettingsError`` mapped from the reply, as for every other call.
    /// How many messages this store's connection has sent since it was opened; nil while it has none (for
    /// measurements: `settings-bench`).
    package func sentMessageCount() async -> UInt64? {
        guard let connection = link.openConnection else { return nil }
        return await connection.sentMessageCount()
    }

    package func call<Request: Settings1.Request>(_ request: Request) async throws(SettingsError) -> Request.Reply {
        try await link.call(request)
    }

    /// Calls a method of any object on the store's bus, through the store's connection: the bus daemon
    /// (`org.freedesktop.DBus`, for `GetNameOwner` or `GetConnectionUnixProcessID`) or another interface of the
    /// broker's object (`org.freedesktop.DBus.Properties`, `org.freedesktop.DBus.Introspectable`).
    ///
    /// Tools such as `settingsctl status` use it for what the typed API does not cover.
    ///
    /// ```swift
    /// let owner = try await settings.callOnBus(
    ///     destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
    ///     member: "GetNameOwner", arguments: [.string("io.github.settingsbus.Settings1")])
    /// ```
    ///
    /// - Parameters:
    ///   - destination: the bus name to call.
    ///   - path: the object path.
    ///   - interface: the interface of the method.
    ///   - member: the method.
    ///   - arguments: the arguments.
    /// - Returns: the reply's values.
    /// - Throws: ``SettingsError``: the broker's own errors keep their codes; the bus's errors
    ///   become `BrokerUnavailable`, `TimedOut` or `Disconnected` as for every other call.
    package func callOnBus(
        destination: BusName, path: ObjectPath, interface: InterfaceName, member: MemberName,
        arguments: [DBusValue] = []
    ) async throws(SettingsError) -> [DBusValue] {
        let connection = try await link.connection()
        do {
            return try await connection.call(
                destination: destination, path: path, interface: interface, member: member, arguments: arguments,
                timeout: link.timeout)
        } catch {
            throw BrokerLink.settingsError(error, bus: link.bus)
        }
    }
}
