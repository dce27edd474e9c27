// SPDX-License-Identifier: Apache-2.0

/// A D-Bus message as a plain Swift value: a method call, a method return, an error or a signal.
///
/// Messages are built and read in Swift; a ``DBusConnection`` turns them into libdbus messages on its own
/// thread, after validating every field and argument, and turns received ones back into `DBusMessage`.
///
/// ```swift
/// let ping = DBusMessage.methodCall(
///     destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
///     interface: "org.freedesktop.DBus.Peer", member: "Ping")
/// ```
public struct DBusMessage: Sendable, Hashable {
    /// The four kinds of D-Bus message.
    public enum Kind: Sendable, Hashable {
        case methodCall
        case methodReturn
        case error
        case signal
    }

    /// The kind of message.
    public var kind: Kind
    /// The serial the sender gave the message; 0 until it is sent.
    public var serial: UInt32 = 0
    /// For returns and errors: the serial of the call answered.
    public var replySerial: UInt32?
    /// The object path (calls and signals).
    public var path: ObjectPath?
    /// The interface (signals always; calls optionally).
    public var interface: InterfaceName?
    /// The method or signal name.
    public var member: MemberName?
    /// For errors: the error name.
    public var errorName: DBusError.Name?
    /// The bus name the message is addressed to.
    public var destination: BusName?
    /// The unique name of the sender, set by the bus daemon on received messages.
    public var sender: BusName?
    /// The arguments.
    public var body: [DBusValue]
    /// Whether the sender expects no reply (method calls).
    public var noReplyExpected = false
    /// Whether the bus may start a service to deliver the call (method calls).
    public var autoStart = true

    /// Makes a message of any kind; prefer the static constructors.
    public init(kind: Kind, body: [DBusValue] = []) {
        self.kind = kind
        self.body = body
    }

    /// The signature of the body.
    public var signature: Signature { Signature(types: body.map(\.type)) }

    /// For an error message: its text, the first string argument if there is one.
    public var errorMessage: String {
        if case .string(let text)? = body.first { return text }
        return ""
    }

    /// Makes a method call.
    public static func methodCall(
        destination: BusName?, path: ObjectPath, interface: InterfaceName?, member: MemberName,
        body: [DBusValue] = []
    ) -> DBusMessage {
        var message = DBusMessage(kind: .methodCall, body: body)
        message.destination = destination
        message.path = path
        message.interface = interface
        message.member = member
        return message
    }

    /// Makes a signal.
    public static func signal(
        path: ObjectPath, interface: InterfaceName, member: MemberName, body: [DBusValue] = [],
        destination: BusName? = nil
    ) -> DBusMessage {
        var message = DBusMessage(kind: .signal, body: body)
        message.path = path
        message.interface = interface
        message.member = member
        message.destination = destination
        return message
    }

    /// Makes the method return that answers a call.
    public static func methodReturn(to call: DBusMessage, body: [DBusValue] = []) -> DBusMessage {
        var message = DBusMessage(kind: .methodReturn, body: body)
        message.replySerial = call.serial
        message.destination = call.sender
        return message
    }

    /// Makes the error reply that answers a call.
    public static func error(replyingTo call: DBusMessage, _ error: DBusError) -> DBusMessage {
        var message = DBusMessage(kind: .error, body: [.string(error.message)])
        message.replySerial = call.serial
        message.destination = call.sender
        message.errorName = error.name
        return message
    }

    /// The object path that libdbus reserves for local messages, `/org/freedesktop/DBus/Local`.
    static let localPath = "/org/freedesktop/DBus/Local"
    /// The interface that libdbus reserves for local messages, `org.freedesktop.DBus.Local`.
    static let localInterface = "org.freedesktop.DBus.Local"

    /// Checks that the message is complete for its kind, uses no name reserved to libdbus, and that every
    /// argument can be sent.
    ///
    /// - Throws: ``DBusError`` named `org.freedesktop.DBus.Error.InvalidArgs`.
    public func validate() throws(DBusError) {
        switch kind {
        case .methodCall:
            guard path != nil, member != nil else {
                throw DBusError(.invalidArgs, "a method call needs a path and a member")
            }
        case .signal:
            guard path != nil, interface != nil, member != nil else {
                throw DBusError(.invalidArgs, "a signal needs a path, an interface and a member")
            }
        case .methodReturn:
            guard replySerial != nil else { throw DBusError(.invalidArgs, "a method return needs a reply serial") }
        case .error:
            guard replySerial != nil, let errorName else {
                throw DBusError(.invalidArgs, "an error needs a reply serial and an error name")
            }
            try NameValidation.check(errorName.rawValue, as: .errorName)
        }
        // libdbus reserves these for messages it makes up locally; the bus disconnects a peer that sends them.
        if path?.rawValue == DBusMessage.localPath || interface?.rawValue == DBusMessage.localInterface {
            throw DBusError(
                .invalidArgs,
                "\(DBusMessage.localPath) and \(DBusMessage.localInterface) are reserved to libdbus and cannot be sent")
        }
        for value in body { try value.validate() }
        let text = signature.text
        guard text.utf8.count <= Signature.maximumLength else {
            throw DBusError(
                .invalidArgs,
                "the message body's signature is \(text.utf8.count) bytes; D-Bus allows \(Signature.maximumLength)")
        }
    }
}
