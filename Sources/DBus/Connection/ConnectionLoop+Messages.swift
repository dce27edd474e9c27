// SPDX-License-Identifier: Apache-2.0

internal import CDBus
internal import Glibc

// Received messages, routed on the loop thread, and messages sent from it. Loop thread only.

extension ConnectionLoop {
    // MARK: - Incoming messages

    func handleIncoming(_ pointer: OpaquePointer) {
        if dbus_message_is_signal(pointer, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
            closeConnection(reason: DBusError(.disconnected, "the connection to the D-Bus peer was lost"))
            return
        }
        let message: DBusMessage
        do {
            message = try MessageCoding.decode(pointer, strings: headerStrings, signatures: signatureTypes)
        } catch {
            rejectUndecodable(pointer, error)
            return
        }
        switch message.kind {
        case .methodReturn, .error: completeCall(with: message)
        case .signal: deliverSignal(message)
        case .methodCall: dispatchMethodCall(message)
        }
    }

    /// Answers a method call whose arguments could not be read; other undecodable messages are dropped.
    func rejectUndecodable(_ pointer: OpaquePointer, _ error: DBusError) {
        guard dbus_message_get_type(pointer) == DBUS_MESSAGE_TYPE_METHOD_CALL,
            dbus_message_get_no_reply(pointer) == 0
        else { return }
        var reply = DBusMessage(kind: .error, body: [.string(error.message)])
        reply.errorName = .invalidArgs
        reply.replySerial = dbus_message_get_serial(pointer)
        if let sender = dbus_message_get_sender(pointer) { reply.destination = BusName(trusted: String(cString: sender)) }
        send(reply)
    }

    // MARK: - Sending

    /// Sends a validated message; returns its serial, or nil if it could not be queued. Loop thread only.
    @discardableResult
    func send(_ message: DBusMessage) -> UInt32? {
        guard let connection else { return nil }
        guard let pointer = try? MessageCoding.encode(message) else { return nil }
        defer { dbus_message_unref(pointer) }
        var serial: UInt32 = 0
        guard dbus_connection_send(connection, pointer, &serial) != 0 else { return nil }
        sentMessages &+= 1
        return serial
    }

    /// Sends a message built off the loop thread, and releases it; returns its serial, or nil if it could not
    /// be queued. Loop thread only.
    @discardableResult
    func send(_ encoded: EncodedMessage) -> UInt32? {
        defer { encoded.release() }
        guard let connection else { return nil }
        var serial: UInt32 = 0
        guard dbus_connection_send(connection, encoded.pointer, &serial) != 0 else { return nil }
        sentMessages &+= 1
        return serial
    }
}

/// A validated message built for libdbus on the thread that sends it, to be handed to the loop thread.
///
/// `@unchecked Sendable`: the libdbus message is referenced by this value alone, from its building until the
/// loop thread sends it, or the value is dropped, and ``release()`` is called exactly once, by whichever of
/// them happens; no two threads use it at once, and libdbus takes its own reference when it queues it.
struct EncodedMessage: @unchecked Sendable {
    fileprivate let pointer: OpaquePointer

    /// Builds the libdbus message, or nil when it cannot be built (as ``ConnectionLoop/send(_:)-(DBusMessage)``
    /// then sends nothing).
    init?(_ message: DBusMessage) {
        guard let pointer = try? MessageCoding.encode(message) else { return nil }
        self.pointer = pointer
    }

    /// Drops this value's reference.
    func release() {
        dbus_message_unref(pointer)
    }
}
