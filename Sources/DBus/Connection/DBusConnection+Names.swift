// SPDX-License-Identifier: Apache-2.0

/// Options for ``DBusConnection/requestName(_:flags:)``.
///
/// The raw values are the `DBUS_NAME_FLAG_*` constants of the D-Bus specification.
public struct RequestNameFlags: OptionSet, Sendable, Hashable {
    /// The flag bits.
    public let rawValue: UInt32

    /// Makes flags from their bits.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Lets a later request with ``replaceExisting`` take the name from this connection
    /// (`DBUS_NAME_FLAG_ALLOW_REPLACEMENT`).
    public static let allowReplacement = RequestNameFlags(rawValue: 1)
    /// Takes the name from its current owner if that owner allowed replacement
    /// (`DBUS_NAME_FLAG_REPLACE_EXISTING`).
    public static let replaceExisting = RequestNameFlags(rawValue: 2)
    /// Fails at once instead of waiting in the queue when the name is owned (`DBUS_NAME_FLAG_DO_NOT_QUEUE`).
    public static let doNotQueue = RequestNameFlags(rawValue: 4)
}

/// The outcome of ``DBusConnection/requestName(_:flags:)``.
public enum RequestNameReply: UInt32, Sendable, Hashable {
    /// The connection now owns the name (`DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER`).
    case primaryOwner = 1
    /// Another connection owns the name; this one waits in its queue (`DBUS_REQUEST_NAME_REPLY_IN_QUEUE`).
    case inQueue = 2
    /// Another connection owns the name and the request did not queue (`DBUS_REQUEST_NAME_REPLY_EXISTS`).
    case exists = 3
    /// The connection already owned the name (`DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER`).
    case alreadyOwner = 4
}

/// The outcome of ``DBusConnection/releaseName(_:)``.
public enum ReleaseNameReply: UInt32, Sendable, Hashable {
    /// The connection owned the name, or waited for it, and no longer does (`DBUS_RELEASE_NAME_REPLY_RELEASED`).
    case released = 1
    /// Nobody owns the name (`DBUS_RELEASE_NAME_REPLY_NON_EXISTENT`).
    case nonExistent = 2
    /// Another connection owns the name and this one was not queued for it (`DBUS_RELEASE_NAME_REPLY_NOT_OWNER`).
    case notOwner = 3
}

extension DBusConnection {
    /// Asks the bus to give this connection a well-known name.
    ///
    /// Export objects before requesting the name, so that the first call sent to the name finds them.
    ///
    /// ```swift
    /// try await bus.export([settings], at: "/io/github/settingsbus/Settings1")
    /// guard try await bus.requestName("io.github.settingsbus.Settings1") == .primaryOwner else { … }
    /// ```
    ///
    /// The corresponding bus method is `org.freedesktop.DBus.RequestName`.
    /// - Parameters:
    ///   - name: a well-known name; unique names (`:1.42`) cannot be requested.
    ///   - flags: whether to queue, replace the owner, or allow replacement; by default the request does not queue.
    /// - Returns: whether the connection now owns the name, waits for it, or was refused.
    /// - Throws: ``DBusError`` from the bus, for example `org.freedesktop.DBus.Error.InvalidArgs` for a unique
    ///   name or `AccessDenied` when the bus policy forbids owning it; `Disconnected` once the connection is
    ///   closed; `CancellationError` when the task is cancelled.
    public func requestName(_ name: BusName, flags: RequestNameFlags = [.doNotQueue]) async throws -> RequestNameReply {
        let reply = try await callBus("RequestName", [.string(name.rawValue), .uint32(flags.rawValue)])
        guard case .uint32(let code)? = reply.first, let result = RequestNameReply(rawValue: code) else {
            throw DBusError(.failed, "the bus answered RequestName with an unexpected reply \(reply)")
        }
        return result
    }

    /// Gives up a well-known name, or leaves its queue.
    ///
    /// The corresponding bus method is `org.freedesktop.DBus.ReleaseName`.
    /// - Returns: whether the name was released, had no owner, or belongs to another connection.
    /// - Throws: as ``requestName(_:flags:)``.
    public func releaseName(_ name: BusName) async throws -> ReleaseNameReply {
        let reply = try await callBus("ReleaseName", [.string(name.rawValue)])
        guard case .uint32(let code)? = reply.first, let result = ReleaseNameReply(rawValue: code) else {
            throw DBusError(.failed, "the bus answered ReleaseName with an unexpected reply \(reply)")
        }
        return result
    }

    /// Returns the unique name of the connection that owns a name, or nil when nobody owns it.
    ///
    /// The corresponding bus method is `org.freedesktop.DBus.GetNameOwner`.
    /// - Throws: ``DBusError`` from the bus other than `NameHasNoOwner`; `Disconnected` once the connection
    ///   is closed; `CancellationError` when the task is cancelled.
    public func nameOwner(of name: BusName) async throws -> BusName? {
        let reply: [DBusValue]
        do {
            reply = try await callBus("GetNameOwner", [.string(name.rawValue)])
        } catch let error as DBusError where error.name == .nameHasNoOwner {
            return nil
        }
        guard case .string(let owner)? = reply.first, let unique = try? BusName(owner) else {
            throw DBusError(.failed, "the bus answered GetNameOwner with an unexpected reply \(reply)")
        }
        return unique
    }

    /// Subscribes to the changes of owner of one name, as the bus announces them.
    ///
    /// The stream yields one ``NameOwnerChange`` per `org.freedesktop.DBus.NameOwnerChanged` signal about
    /// `name`, from the moment this returns; it does not yield the current owner (ask ``nameOwner(of:)``
    /// after subscribing for that).
    ///
    /// ```swift
    /// let changes = try await bus.nameOwnerChanges(of: "io.github.settingsbus.Settings1")
    /// for await change in changes where change.newOwner == nil { print("the broker went away") }
    /// ```
    ///
    /// The corresponding bus signal is `org.freedesktop.DBus.NameOwnerChanged`, selected with `arg0`.
    /// - Throws: as ``signals(matching:bufferingPolicy:)``.
    public func nameOwnerChanges(of name: BusName) async throws(DBusError) -> NameOwnerChanges {
        var rule = MatchRule(
            sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged",
            path: "/org/freedesktop/DBus")
        rule.arguments[0] = name.rawValue
        return NameOwnerChanges(signals: try await signals(matching: rule))
    }

    private func callBus(_ member: MemberName, _ arguments: [DBusValue]) async throws -> [DBusValue] {
        try await call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: member, arguments: arguments)
    }
}
