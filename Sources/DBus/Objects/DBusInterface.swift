// SPDX-License-Identifier: Apache-2.0

/// An interface that an exported object implements: its methods, signals and properties.
///
/// ```swift
/// let greeter = DBusInterface(name: "org.example.Greeter1", methods: [
///     DBusMethod(name: "Hello", inputs: [.init("name", .string)], outputs: [.init("greeting", .string)]) { call in
///         guard case .string(let name) = call.arguments[0] else { return [] }
///         return [.string("Hello, \(name)!")]
///     },
/// ])
/// try await connection.export([greeter], at: "/org/example/Greeter1")
/// ```
public struct DBusInterface: Sendable {
    /// The interface name.
    public var name: InterfaceName
    /// The methods.
    public var methods: [DBusMethod]
    /// The signals the object emits (for introspection).
    public var signals: [DBusSignal]
    /// The properties, served through `org.freedesktop.DBus.Properties`.
    public var properties: [DBusProperty]
    /// Whether every method call is dispatched knowing its caller (``DBusMethodCall/senderCredentials``): the
    /// first call of a unique name waits for one `GetConnectionCredentials` round trip to the bus daemon, and
    /// that name's later calls wait behind it, in order; other callers' calls go on meanwhile. For a service
    /// that decides by who calls, on every call.
    public var identifiesCallers: Bool

    /// Makes an interface.
    public init(
        name: InterfaceName, methods: [DBusMethod] = [], signals: [DBusSignal] = [], properties: [DBusProperty] = [],
        identifiesCallers: Bool = false
    ) {
        self.name = name
        self.methods = methods
        self.signals = signals
        self.properties = properties
        self.identifiesCallers = identifiesCallers
    }
}

/// A named, typed argument of a method or signal.
public struct DBusArgument: Sendable, Hashable {
    /// The name shown by introspection.
    public var name: String
    /// The type.
    public var type: DBusType

    /// Makes an argument.
    public init(_ name: String, _ type: DBusType) {
        self.name = name
        self.type = type
    }
}

/// A method of an exported interface and the async handler that serves it.
///
/// The connection checks the call's arguments against ``inputs`` before the handler runs (a mismatch is
/// answered with `org.freedesktop.DBus.Error.InvalidArgs`) and the handler's results against ``outputs``. A
/// handler that throws a ``DBusError`` sends that error; any other error is sent as
/// `org.freedesktop.DBus.Error.Failed` with its description.
///
/// - Important: Handlers run as concurrent tasks, one per call, so two calls may be served in any order.
///   An immediate handler (``init(name:inputs:outputs:immediate:)``) runs on the connection's own thread
///   instead, in the order the calls arrive (except a call whose handler asks for the caller's user and
///   waits for it: ``DBusMethodCall/SenderUnixUserNeeded``).
public struct DBusMethod: Sendable {
    /// The method name.
    public var name: MemberName
    /// The input arguments.
    public var inputs: [DBusArgument]
    /// The output arguments.
    public var outputs: [DBusArgument]
    /// The handler; it returns the output values.
    public var handler: @Sendable (DBusMethodCall) async throws -> [DBusValue]
    /// The handler of a method made with ``init(name:inputs:outputs:immediate:)``, run on the connection's
    /// thread; `nil` for an async method.
    public var immediateHandler: (@Sendable (DBusMethodCall) throws -> [DBusValue])?
    /// The handler of a method made with ``init(name:inputs:outputs:deferred:)``, run on the connection's
    /// thread; `nil` for other methods.
    public var deferredHandler: (@Sendable (DBusMethodCall, DBusReply) -> Void)?

    /// Makes a method.
    public init(
        name: MemberName, inputs: [DBusArgument] = [], outputs: [DBusArgument] = [],
        handler: @escaping @Sendable (DBusMethodCall) async throws -> [DBusValue]
    ) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.handler = handler
    }

    /// Makes a method whose handler answers at once, on the connection's own thread, as soon as the call is
    /// read: no task is started and the reply is sent before the next message is read, which saves two thread
    /// wake-ups per call. For answers from memory only.
    ///
    /// - Important: The handler must not block, wait or do long work (take only short locks): while it runs,
    ///   the connection reads and sends nothing else.
    public init(
        name: MemberName, inputs: [DBusArgument] = [], outputs: [DBusArgument] = [],
        immediate: @escaping @Sendable (DBusMethodCall) throws -> [DBusValue]
    ) {
        self.init(name: name, inputs: inputs, outputs: outputs, handler: { call in try immediate(call) })
        self.immediateHandler = immediate
    }

    /// Makes a method whose handler starts on the connection's own thread and answers later, from any thread,
    /// through the ``DBusReply`` it is given: for work handed to a thread of its own (a disk write), whose
    /// answer then needs no task to reach the connection.
    ///
    /// - Important: The handler must not block or wait, as for an immediate handler, and must answer through
    ///   the reply exactly once; a call never answered fails at the caller's timeout.
    public init(
        name: MemberName, inputs: [DBusArgument] = [], outputs: [DBusArgument] = [],
        deferred: @escaping @Sendable (DBusMethodCall, DBusReply) -> Void
    ) {
        self.init(
            name: name, inputs: inputs, outputs: outputs,
            handler: { call in
                try await withCheckedThrowingContinuation { continuation in
                    deferred(call, DBusReply { continuation.resume(with: $0) })
                }
            })
        self.deferredHandler = deferred
    }
}

/// The answer to a call of a method with a deferred handler; it may be given from any thread, once.
public final class DBusReply: Sendable {
    private let deliver: Locked<(@Sendable (Result<[DBusValue], any Error>) -> Void)?>
    private let schedule: (@Sendable (@escaping @Sendable () -> Void) -> Bool)?

    init(
        afterDispatch schedule: (@Sendable (@escaping @Sendable () -> Void) -> Bool)? = nil,
        _ deliver: @escaping @Sendable (Result<[DBusValue], any Error>) -> Void
    ) {
        self.deliver = Locked(deliver)
        self.schedule = schedule
    }

    /// Runs `work` on the connection's thread once it has dispatched every message it has read so far, and
    /// before it waits for more: work done there once for all of those calls (one disk commit for several
    /// writes) needs no other thread, and answers sent from it need no wake-up. Call it from the deferred
    /// handler, which runs on that thread.
    ///
    /// - Important: While `work` runs, the connection reads and sends nothing: keep it short and bounded.
    /// - Returns: false, and `work` does not run, when there is no connection thread to run it on (the
    ///   handler was not called by a connection, or not on its thread, or the connection has ended).
    public func afterDispatch(_ work: @escaping @Sendable () -> Void) -> Bool {
        schedule?(work) ?? false
    }

    /// Answers with the output values, or with an error (a ``DBusError`` keeps its name; any other error is
    /// sent as `org.freedesktop.DBus.Error.Failed`). Only the first answer is sent.
    public func send(_ result: Result<[DBusValue], any Error>) {
        let deliver = self.deliver.withLock { deliver in
            defer { deliver = nil }
            return deliver
        }
        deliver?(result)
    }
}

/// A received method call, as a handler sees it.
public struct DBusMethodCall: Sendable {
    /// The whole message.
    public var message: DBusMessage
    /// The arguments, already checked against the method's input types.
    public var arguments: [DBusValue] { message.body }
    /// The unique bus name of the caller, if the connection is to a bus.
    public var sender: BusName? { message.sender }
    /// The caller's credentials, once the connection has found them out: known at once for a caller looked up
    /// before and for every call of an interface that ``DBusInterface/identifiesCallers``; else nil when the
    /// handler runs for the first time, set when it runs again after throwing ``SenderUnixUserNeeded``.
    public internal(set) var senderCredentials: DBusCredentials?
    /// The Unix user id of the caller, once known (see ``senderCredentials``).
    public var senderUnixUser: UInt32? { senderCredentials?.user }

    /// Makes the call a handler sees for a received message.
    init(message: DBusMessage, sender credentials: DBusCredentials? = nil) {
        self.message = message
        self.senderCredentials = credentials
    }

    /// Thrown by the handler of an immediate or an async method that must know who calls before it answers
    /// (a value only some users may read): the connection finds out the caller's Unix user without blocking,
    /// and runs the handler again with ``DBusMethodCall/senderUnixUser`` set.
    ///
    /// Only a call that needs it pays for it: a handler that never throws this runs once, as before. The
    /// connection keeps the credentials of each unique name it has looked up (unique names are never reused on
    /// a bus) and forgets them when the name leaves the bus, so a caller costs one round trip to the bus daemon
    /// (`org.freedesktop.DBus.GetConnectionCredentials`) at its first such call, and its later calls find the
    /// user set at once; meanwhile the connection goes on reading, and an immediate method's answer to that
    /// call may follow answers to the caller's later calls.
    /// On a connection to a single peer the peer's user is read from the socket. When the user cannot be
    /// found out (the caller has left, the bus refuses), the call is answered with that error, and a handler
    /// that throws this again is answered with `org.freedesktop.DBus.Error.Failed`.
    ///
    /// ```swift
    /// DBusMethod(name: "ReadToken", outputs: [.init("token", .string)], immediate: { call in
    ///     guard let user = call.senderUnixUser else { throw DBusMethodCall.SenderUnixUserNeeded() }
    ///     guard user == 0 else { throw DBusError(.accessDenied, "only root reads the token") }
    ///     return [.string(token)]
    /// })
    /// ```
    ///
    /// - Important: It is for immediate and async handlers; a deferred handler that answers with it gets
    ///   `org.freedesktop.DBus.Error.Failed`.
    public struct SenderUnixUserNeeded: Error, Sendable {
        /// Makes the request.
        public init() {}
    }
}

/// A signal an exported interface emits, described for introspection.
public struct DBusSignal: Sendable, Hashable {
    /// The signal name.
    public var name: MemberName
    /// Its arguments.
    public var arguments: [DBusArgument]

    /// Makes a signal description.
    public init(name: MemberName, arguments: [DBusArgument] = []) {
        self.name = name
        self.arguments = arguments
    }
}

/// A property of an exported interface.
public struct DBusProperty: Sendable {
    /// How `org.freedesktop.DBus.Properties.PropertiesChanged` reports changes of the property.
    public enum ChangeSignal: String, Sendable {
        /// The signal carries the new value.
        case emitsValue = "true"
        /// The signal names the property without its value.
        case invalidates
        /// The property never changes.
        case constant = "const"
        /// Changes are not announced.
        case none = "false"
    }

    /// The property name.
    public var name: MemberName
    /// The property's type.
    public var type: DBusType
    /// How changes are announced.
    public var changeSignal: ChangeSignal
    /// Reads the value.
    public var getter: @Sendable () async throws -> DBusValue
    /// Writes the value; nil for a read-only property.
    public var setter: (@Sendable (DBusValue) async throws -> Void)?

    /// Makes a property; pass `set` to make it writable.
    public init(
        name: MemberName, type: DBusType, changeSignal: ChangeSignal = .emitsValue,
        get: @escaping @Sendable () async throws -> DBusValue,
        set: (@Sendable (DBusValue) async throws -> Void)? = nil
    ) {
        self.name = name
        self.type = type
        self.changeSignal = changeSignal
        self.getter = get
        self.setter = set
    }

    var access: String { setter == nil ? "read" : "readwrite" }
}
