// SPDX-License-Identifier: Apache-2.0

/// A method call waiting for its reply, on the loop thread.
struct PendingCall {
    /// Milliseconds on the monotonic clock after which the call fails with `NoReply`.
    var deadline: Int64
    /// The call's interface, member and destination, and its timeout: what `NoReply` names. Kept as they are
    /// and put into words only at the timeout, so that a call that is answered formats nothing.
    var interface: InterfaceName?
    var member: MemberName?
    var destination: BusName?
    var timeoutMillis: Int64
    var completion: (Result<DBusMessage, any Error>) -> Void

    var timeoutText: String {
        let seconds = Double(timeoutMillis) / 1000
        return "no reply to \(ConnectionLoop.describe(interface, member, destination)) within \(seconds) s"
    }
}

/// The cancellation state of one call, shared by the job that starts it and the job that cancels it.
///
/// This type is manually `Sendable` because both jobs run while holding the loop (on its thread, or the one
/// that starts the call in ``ConnectionLoop/runNow(_:)``), one after the other, and nothing else touches it.
final class CallTicket: @unchecked Sendable {
    var cancelled = false
    var serial: UInt32?
}

extension ConnectionLoop {
    /// Sends a method call and arranges for `completion` to run on the loop thread with its reply, its error,
    /// `NoReply` at the deadline, or `Disconnected`. Loop thread only.
    func startCall(
        _ message: DBusMessage, timeoutMillis: Int64, ticket: CallTicket? = nil,
        completion: @escaping (Result<DBusMessage, any Error>) -> Void
    ) {
        if let ticket, ticket.cancelled {
            completion(.failure(CancellationError()))
            return
        }
        guard connection != nil else {
            completion(.failure(endReason ?? ConnectionLoop.closedError))
            return
        }
        guard let serial = send(message) else {
            completion(.failure(DBusError(.noMemory, "libdbus could not queue the call \(describe(message))")))
            return
        }
        ticket?.serial = serial
        pendingCalls[serial] = PendingCall(
            deadline: monotonicMillis() + timeoutMillis, interface: message.interface, member: message.member,
            destination: message.destination, timeoutMillis: timeoutMillis, completion: completion)
    }

    /// Cancels a call started with `ticket`, or marks the ticket so the call never starts. Loop thread only.
    func cancelCall(_ ticket: CallTicket) {
        ticket.cancelled = true
        if let serial = ticket.serial, let pending = pendingCalls.removeValue(forKey: serial) {
            pending.completion(.failure(CancellationError()))
        }
    }

    func completeCall(with reply: DBusMessage) {
        guard let serial = reply.replySerial, let pending = pendingCalls.removeValue(forKey: serial) else { return }
        if reply.kind == .error {
            pending.completion(.failure(DBusError(reply.errorName ?? .failed, reply.errorMessage)))
        } else {
            pending.completion(.success(reply))
        }
    }

    func nearestCallDeadline() -> Int64? {
        var nearest: Int64?
        for pending in pendingCalls.values where nearest.map({ pending.deadline < $0 }) ?? true {
            nearest = pending.deadline
        }
        return nearest
    }

    func expireCalls(now: Int64) {
        guard !pendingCalls.isEmpty else { return }
        let expired = pendingCalls.filter { $0.value.deadline <= now }
        for (serial, pending) in expired {
            pendingCalls[serial] = nil
            pending.completion(.failure(DBusError(.noReply, pending.timeoutText)))
        }
    }

    func failAllPending(_ error: DBusError) {
        let all = pendingCalls
        pendingCalls.removeAll()
        for pending in all.values { pending.completion(.failure(error)) }
    }

    func describe(_ message: DBusMessage) -> String {
        Self.describe(message.interface, message.member, message.destination)
    }

    /// `interface.member on destination`, for errors about a call.
    static func describe(_ interface: InterfaceName?, _ member: MemberName?, _ destination: BusName?) -> String {
        let name = [interface?.rawValue, member?.rawValue].compactMap { $0 }.joined(separator: ".")
        let target = destination.map { " on \($0)" } ?? ""
        return "\(name)\(target)"
    }

    /// Calls a method of the bus daemon. Loop thread only.
    func callBus(
        _ member: MemberName, _ body: [DBusValue],
        completion: @escaping (Result<DBusMessage, any Error>) -> Void
    ) {
        let message = DBusMessage.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: member, body: body)
        startCall(message, timeoutMillis: 25_000, completion: completion)
    }
}
