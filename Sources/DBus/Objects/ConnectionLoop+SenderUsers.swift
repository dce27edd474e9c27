// SPDX-License-Identifier: Apache-2.0

internal import CDBus

/// The Unix users of the callers a handler asked about (``DBusMethodCall/SenderUnixUserNeeded``), on the loop
/// thread.
///
/// Unique names are never reused on a bus, so a user found for one stays true while the name exists. Once it
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

    /// The user of each unique name looked up.
    var users: [String: UInt32] = [:]
    /// The callers of the lookups in flight, by unique name: one `GetConnectionUnixUser` serves them all.
    var waiting: [String: [(Result<UInt32, DBusError>) -> Void]] = [:]
    /// Whether the departure rule was asked for.
    var followsDepartures = false

    mutating func remember(_ user: UInt32, of name: String) {
        if users.count >= Self.limit { users.removeAll() }
        users[name] = user
    }
}

extension ConnectionLoop {
    /// Finds the Unix user of the sender of `message`, and runs `done` with it on the loop thread: at once
    /// when the user is known, or when the bus daemon answers. Never waits. Loop thread only.
    func senderUnixUser(of message: DBusMessage, done: @escaping (Result<UInt32, DBusError>) -> Void) {
        guard let connection else {
            done(.failure(endReason ?? ConnectionLoop.closedError))
            return
        }
        guard isBusConnection else {
            // A peer's user comes from its socket's credentials.
            var user: UInt = 0
            guard dbus_connection_get_unix_user(connection, &user) != 0 else {
                done(.failure(DBusError(.accessDenied, "the user of the peer is not known")))
                return
            }
            done(.success(UInt32(truncatingIfNeeded: user)))
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
        callBus("GetConnectionUnixUser", [.string(sender)]) { [self] reply in
            let result: Result<UInt32, DBusError>
            switch reply {
            case .success(let message):
                if case .uint32(let user)? = message.body.first {
                    result = .success(user)
                } else {
                    result = .failure(DBusError(.failed, "GetConnectionUnixUser returned '\(message.signature)'"))
                }
            case .failure(let error as DBusError):
                result = .failure(error)
            case .failure(let error):
                result = .failure(DBusError(.failed, "GetConnectionUnixUser failed: \(error)"))
            }
            if case .success(let user) = result { senderUsers.remember(user, of: sender) }
            let callers = senderUsers.waiting.removeValue(forKey: sender) ?? []
            for caller in callers { caller(result) }
        }
    }

    /// Forgets the user of a name that left the bus. Loop thread only.
    func senderLeft(_ name: String) {
        if !senderUsers.users.isEmpty { senderUsers.users[name] = nil }
    }
}
