// SPDX-License-Identifier: Apache-2.0

internal import CDBus

/// The credentials (Unix user, process id) of the callers a handler asked about
/// (``DBusMethodCall/SenderUnixUserNeeded``) or an interface identifies (``DBusInterface/identifiesCallers``),
/// on the loop thread.
///
/// Unique names are never reused on a bus, so credentials found for one stay true while the name exists. Once it
/// holds a name, the loop follows every name that leaves the bus (`NameOwnerChanged` with no new owner) and
/// forgets it; the cache is also bounded (``limit``), in case the bus refused that match rule.
struct SenderUsers {
    /// The most names kept; when full, the cache starts again empty.
    static let limit = 4096

    /// The match rule that reports names leaving the bus.
    static let departureRule: String = {
        var rule = MatchRule(
            sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
        rule.arguments[2] = ""
        return rule.text
    }()

    /// The credentials of each unique name looked up.
    var users: [String: DBusCredentials] = [:]
    /// The callers of the lookups in flight, by unique name: one `GetConnectionCredentials` serves them all.
    var waiting: [String: [(Result<DBusCredentials, DBusError>) -> Void]] = [:]
    /// The calls to an interface that identifies its callers, held by sender until its credentials are known
    /// (then dispatched in the order they came).
    var held: [String: [DBusMessage]] = [:]
    /// Whether the departure rule was asked for.
    var followsDepartures = false

    mutating func remember(_ credentials: DBusCredentials, of name: String) {
        if users.count >= Self.limit { users.removeAll() }
        users[name] = credentials
    }
}

/// What the bus daemon proves about the process behind a unique name (`GetConnectionCredentials`), or the
/// socket about a peer.
public struct DBusCredentials: Sendable, Hashable {
    /// The Unix user id.
    public var user: UInt32
    /// The process id, in the bus daemon's pid namespace; nil when the bus does not know it.
    public var processID: UInt32?

    /// Makes credentials.
    public init(user: UInt32, processID: UInt32?) {
        self.user = user
        self.processID = processID
    }
}

extension ConnectionLoop {
    /// Finds the credentials of the sender of `message`, and runs `done` with them on the loop thread: at
    /// once when they are known, or when the bus daemon answers. Never waits. Loop thread only.
    func senderCredentials(of message: DBusMessage, done: @escaping (Result<DBusCredentials, DBusError>) -> Void) {
        guard let connection else {
            done(.failure(endReason ?? ConnectionLoop.closedError))
            return
        }
        guard isBusConnection else {
            // A peer's user and process come from its socket's credentials.
            var user: UInt = 0
            guard dbus_connection_get_unix_user(connection, &user) != 0 else {
                done(.failure(DBusError(.accessDenied, "the user of the peer is not known")))
                return
            }
            var pid: UInt = 0
            let known = dbus_connection_get_unix_process_id(connection, &pid) != 0
            done(
                .success(
                    DBusCredentials(
                        user: UInt32(truncatingIfNeeded: user), processID: known ? UInt32(truncatingIfNeeded: pid) : nil)))
            return
        }
        guard let sender = message.sender?.rawValue else {
            done(.failure(DBusError(.accessDenied, "the call carries no sender, so its user is not known")))
            return
        }
        if let user = senderUsers.users[sender] {
            done(.success(user))
            return
        }
        if senderUsers.waiting[sender] != nil {
            senderUsers.waiting[sender]!.append(done)
            return
        }
        senderUsers.waiting[sender] = [done]
        if !senderUsers.followsDepartures {
            // Sent before the lookup, so the bus applies it first: a name that leaves after it was looked up
            // is always reported.
            senderUsers.followsDepartures = true
            callBus("AddMatch", [.string(SenderUsers.departureRule)]) { _ in
                // Refused (too many rules): the cache's bound still holds it.
            }
        }
        callBus("GetConnectionCredentials", [.string(sender)]) { [self] reply in
            let result: Result<DBusCredentials, DBusError>
            switch reply {
            case .success(let message):
                if let credentials = Self.credentials(message.body.first) {
                    result = .success(credentials)
                } else {
                    result = .failure(
                        DBusError(.failed, "GetConnectionCredentials returned '\(message.signature)' with no UnixUserID"))
                }
            case .failure(let error as DBusError):
                result = .failure(error)
            case .failure(let error):
                result = .failure(DBusError(.failed, "GetConnectionCredentials failed: \(error)"))
            }
            if case .success(let user) = result { senderUsers.remember(user, of: sender) }
            let callers = senderUsers.waiting.removeValue(forKey: sender) ?? []
            for caller in callers { caller(result) }
        }
    }

    /// Forgets the credentials of a name that left the bus. Loop thread only.
    func senderLeft(_ name: String) {
        if !senderUsers.users.isEmpty { senderUsers.users[name] = nil }
    }

    /// The user and process id in a `GetConnectionCredentials` answer (`a{sv}`); nil without a user.
    private static func credentials(_ value: DBusValue?) -> DBusCredentials? {
        guard case .dictionary(_, _, let entries)? = value else { return nil }
        var user: UInt32?
        var pid: UInt32?
        for entry in entries {
            guard case .string(let name) = entry.key, case .variant(let inner) = entry.value else { continue }
            switch (name, inner) {
            case ("UnixUserID", .uint32(let value)): user = value
            case ("ProcessID", .uint32(let value)): pid = value
            default: break
            }
        }
        return user.map { DBusCredentials(user: $0, processID: pid) }
    }
}
