// SPDX-License-Identifier: Apache-2.0

internal import CDBus
internal import Glibc
import Synchronization

/// A connection to a D-Bus message bus or peer.
///
/// Each connection owns a private libdbus connection and a thread that runs its loop; every libdbus call is
/// made by that thread, or by a thread that sends while the loop waits in `poll` and holds its lock meanwhile
/// (libdbus then writes without blocking), so Swift tasks only ever await. Method calls are async, with a per-call timeout
/// and Task cancellation; signals arrive as ``DBusSignalStream``s; objects are exported with ``export(_:at:)``.
///
/// ```swift
/// let bus = try await DBusConnection.connect(to: .session)
/// let reply = try await bus.call(
///     destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
///     interface: "org.freedesktop.DBus", member: "GetId")
/// await bus.close()
/// ```
///
/// - Important: Call ``close()`` when done; a connection that is released without it is closed in the
///   background. Closing fails every pending call with `org.freedesktop.DBus.Error.Disconnected` and ends
///   every stream.
public final class DBusConnection: Sendable {
    /// Where to connect.
    public enum Bus: Sendable, Hashable {
        /// The user's session bus (`DBUS_SESSION_BUS_ADDRESS`).
        case session
        /// The system bus.
        case system
        /// A message bus at an explicit address, such as `unix:path=/run/user/1000/bus`.
        case address(String)
        /// A single peer (no bus daemon) at an address: no `Hello`, no names, no match rules.
        case peer(String)
    }

    let loop: ConnectionLoop
    private let nextID = Atomic<UInt64>(1)

    /// Runs the jobs of tasks that prefer it on this connection's thread (see ``DBusConnectionExecutor``).
    public let executor: DBusConnectionExecutor

    /// The unique name the bus assigned (`:1.42`); nil on a peer connection.
    public let uniqueName: BusName?

    /// The GUID the bus or peer gave when the connection was authenticated (libdbus's
    /// `dbus_connection_get_server_id`, GDBus's `g_dbus_connection_get_guid`): the same for every connection
    /// made to one address of one bus daemon.
    public let serverID: String?

    /// The identity of the socket file the connection reached, `device:inode` in decimal, when it reached one (a
    /// `unix:path=` address): what names the bus to a process that has not connected yet (an app's GIO module
    /// finds its bus's socket in its address). Nil for an abstract socket, TCP or a peer without a file.
    public let serverSocket: String?

    /// The default timeout of a method call, as in libdbus.
    public static let defaultTimeout: Duration = .seconds(25)

    private init(loop: ConnectionLoop, uniqueName: BusName?, serverID: String?, serverSocket: String?) {
        self.loop = loop
        self.uniqueName = uniqueName
        self.serverID = serverID
        self.serverSocket = serverSocket
        self.executor = DBusConnectionExecutor(loop: loop)
    }

    deinit {
        loop.enqueue { $0.requestExit() }
    }

    /// Opens a private connection and, for a bus, registers on it.
    ///
    /// The connection never exits the process when the bus goes away (libdbus's exit-on-disconnect is
    /// turned off at once).
    ///
    /// The corresponding libdbus functions are `dbus_bus_get_private`, `dbus_connection_open_private` and
    /// `dbus_bus_register`.
    /// - Throws: ``DBusError`` from libdbus, for example `org.freedesktop.DBus.Error.FileNotFound` or
    ///   `org.freedesktop.DBus.Error.NoServer` when nothing listens at the address.
    public static func connect(to bus: Bus = .session) async throws(DBusError) -> DBusConnection {
        if case .address(let address) = bus, address.utf8.contains(0) || address.isEmpty {
            throw DBusError(.invalidArgs, "a D-Bus address must be non-empty and free of NUL characters")
        }
        if case .peer(let address) = bus, address.utf8.contains(0) || address.isEmpty {
            throw DBusError(.invalidArgs, "a D-Bus address must be non-empty and free of NUL characters")
        }
        let loop = try ConnectionLoop()
        let opened: Result<(BusName?, String?, String?), DBusError> = await handOff { deliver in
            do throws(DBusError) {
                try loop.start { loop in
                    deliver(DBusConnection.open(bus, on: loop))
                }
            } catch {
                deliver(.failure(error))
            }
        }
        let (uniqueName, serverID, serverSocket) = try opened.get()
        let connection = DBusConnection(
            loop: loop, uniqueName: uniqueName, serverID: serverID, serverSocket: serverSocket)
        loop.enqueue { [weak connection] in $0.owner = connection }
        return connection
    }

    /// Opens the libdbus connection on the loop thread.
    private static func open(_ bus: Bus, on loop: ConnectionLoop) -> Result<(BusName?, String?, String?), DBusError> {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        func failure(_ fallback: String) -> Result<(BusName?, String?, String?), DBusError> {
            guard dbus_error_is_set(&error) != 0 else { return .failure(DBusError(.failed, fallback)) }
            return .failure(
                DBusError(
                    DBusError.Name(rawValue: String(cString: error.name)), String(cString: error.message)))
        }
        let pointer: OpaquePointer?
        switch bus {
        case .session: pointer = dbus_bus_get_private(DBUS_BUS_SESSION, &error)
        case .system: pointer = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error)
        case .address(let address), .peer(let address): pointer = dbus_connection_open_private(address, &error)
        }
        guard let pointer else { return failure("cannot connect to the D-Bus \(bus)") }
        dbus_connection_set_exit_on_disconnect(pointer, 0)
        if case .address = bus, dbus_bus_register(pointer, &error) == 0 {
            dbus_connection_close(pointer)
            dbus_connection_unref(pointer)
            return failure("cannot register on the bus \(bus)")
        }
        guard loop.install(on: pointer) else {
            dbus_connection_close(pointer)
            dbus_connection_unref(pointer)
            return .failure(DBusError(.noMemory, "libdbus could not set up the connection's main loop"))
        }
        loop.connection = pointer
        var serverID: String?
        if let id = dbus_connection_get_server_id(pointer) {
            serverID = String(cString: id)
            dbus_free(id)
        }
        let serverSocket = socketFileIdentity(of: pointer)
        if case .peer = bus {
            loop.isBusConnection = false
            return .success((nil, serverID, serverSocket))
        }
        guard let unique = dbus_bus_get_unique_name(pointer) else { return .success((nil, serverID, serverSocket)) }
        return .success((BusName(trusted: String(cString: unique)), serverID, serverSocket))
    }

    /// `device:inode` of the socket file the connection's peer listens on (`getpeername`, then `stat` of the
    /// path); nil when it listens on none (an abstract socket, TCP).
    private static func socketFileIdentity(of pointer: OpaquePointer) -> String? {
        var descriptor: Int32 = -1
        guard dbus_connection_get_unix_fd(pointer, &descriptor) != 0, descriptor >= 0 else { return nil }
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
        guard named == 0, address.sun_family == sa_family_t(AF_UNIX), Int(length) > pathOffset + 1 else { return nil }
        let path = withUnsafeBytes(of: &address.sun_path) { bytes -> String? in
            // An abstract socket's name begins with a NUL byte; a path ends at its NUL or at the length given.
            let used = bytes.prefix(Int(length) - pathOffset)
            guard let first = used.first, first != 0 else { return nil }
            return String(decoding: used.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        var status = stat()
        guard let path, stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return "\(status.st_dev):\(status.st_ino)"
    }

    /// Closes the connection and waits for its thread to finish.
    ///
    /// Pending calls fail with `org.freedesktop.DBus.Error.Disconnected` and every stream ends. Closing twice
    /// is harmless.
    public func close() async {
        loop.enqueue { $0.requestExit() }
        await loop.waitUntilExited()
    }

    /// Waits until the connection has ended: closed by ``close()``, or lost because the bus or peer went away.
    /// Returns early if the calling task is cancelled.
    public func waitUntilClosed() async {
        await loop.waitUntilExited()
    }

    /// How many messages this connection has sent since it was opened (after `Hello`): for measurements.
    package func sentMessageCount() async -> UInt64 {
        (try? await loop.perform { $0.sentMessages }) ?? 0
    }

    func makeID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    // MARK: - Calls

    /// Calls a method and returns the reply message.
    ///
    /// - Parameters:
    ///   - message: a method call; it is validated before anything is sent.
    ///   - timeout: how long to wait for the reply.
    /// - Returns: the method return.
    /// - Throws: ``DBusError`` for an error reply (keeping the peer's name and message), `NoReply` at the
    ///   timeout, `Disconnected` when the connection ends, `InvalidArgs` for a message that fails validation;
    ///   `CancellationError` when the calling task is cancelled, which returns at once.
    public func call(_ message: DBusMessage, timeout: Duration = DBusConnection.defaultTimeout) async throws
        -> DBusMessage
    {
        guard message.kind == .methodCall, !message.noReplyExpected else {
            throw DBusError(.invalidArgs, "call(_:) takes a method call that expects a reply; use send(_:)")
        }
        try message.validate()
        try Task.checkCancellation()
        let millis = DBusConnection.milliseconds(timeout)
        let ticket = CallTicket()
        let loop = self.loop
        return try await withTaskCancellationHandler {
            let result: Result<DBusMessage, any Error> = await handOff { deliver in
                let job: ConnectionLoop.Job = { loop in
                    loop.startCall(message, timeoutMillis: millis, ticket: ticket) { deliver($0) }
                }
                if !loop.runNow(job), !loop.enqueue(job) { deliver(.failure(ConnectionLoop.closedError)) }
            }
            return try result.get()
        } onCancel: {
            loop.enqueue { $0.cancelCall(ticket) }
        }
    }

    /// Calls a method and returns the reply's arguments.
    ///
    /// ```swift
    /// let values = try await bus.call(
    ///     destination: "io.github.settingsbus.Settings1", path: "/io/github/settingsbus/Settings1",
    ///     interface: "io.github.settingsbus.Settings1", member: "Get", arguments: [.string("/a/b")])
    /// ```
    /// - Throws: as ``call(_:timeout:)``.
    public func call(
        destination: BusName?, path: ObjectPath, interface: InterfaceName?, member: MemberName,
        arguments: [DBusValue] = [], timeout: Duration = DBusConnection.defaultTimeout
    ) async throws -> [DBusValue] {
        let message = DBusMessage.methodCall(
            destination: destination, path: path, interface: interface, member: member, body: arguments)
        return try await call(message, timeout: timeout).body
    }

    /// A duration in whole milliseconds, 0 or more; a duration too long for them is a very long time.
    package static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let millis = seconds.multipliedReportingOverflow(by: 1000)
        guard !millis.overflow else { return Int64.max / 4 }
        return max(0, millis.partialValue + attoseconds / 1_000_000_000_000_000)
    }

    /// Sends a message without waiting: a signal, or a call that expects no reply.
    ///
    /// The corresponding libdbus function is `dbus_connection_send`.
    /// - Throws: ``DBusError`` `InvalidArgs` for a message that fails validation, `Disconnected` once the
    ///   connection is closed.
    public func send(_ message: DBusMessage) throws(DBusError) {
        try message.validate()
        guard loop.sendSoon(message) else { throw ConnectionLoop.closedError }
    }

    /// Emits a signal from an object path.
    ///
    /// - Throws: as ``send(_:)``.
    public func emitSignal(
        path: ObjectPath, interface: InterfaceName, member: MemberName, arguments: [DBusValue] = []
    ) throws(DBusError) {
        try send(.signal(path: path, interface: interface, member: member, body: arguments))
    }

    // MARK: - Signals

    /// Subscribes to the signals that a match rule selects.
    ///
    /// The rule is active on the bus when this returns, so no signal sent afterwards is missed. Streams with
    /// the same rule share one rule on the bus; it is removed when the last of them ends (its task is
    /// cancelled, or the stream and its iterators are released). A rule whose ``MatchRule/sender`` is a
    /// well-known name only passes signals from that name's current owner.
    ///
    /// ```swift
    /// let changes = try await bus.signals(matching: MatchRule(sender: "org.example.App", member: "Changed"))
    /// for await signal in changes { print(signal.body) }
    /// ```
    /// - Throws: ``DBusError`` `MatchRuleInvalid` for a bad rule (checked locally or by the bus),
    ///   `Disconnected` if the connection is closed.
    public func signals(
        matching rule: MatchRule,
        bufferingPolicy: AsyncStream<DBusMessage>.Continuation.BufferingPolicy = .unbounded
    ) async throws(DBusError) -> DBusSignalStream {
        let (stream, continuation) = AsyncStream.makeStream(of: DBusMessage.self, bufferingPolicy: bufferingPolicy)
        let subscription: DBusSignalSubscription
        do {
            subscription = try await subscribe(
                rule, SignalSink(deliver: { continuation.yield($0) }, finish: { continuation.finish() }))
        } catch {
            continuation.finish()
            throw error
        }
        continuation.onTermination = { _ in subscription.end() }
        return DBusSignalStream(stream: stream, subscription: subscription)
    }

    /// Calls `handler` with each signal that a match rule selects, on the connection's own thread, as the
    /// signal is read: for a consumer that passes signals on at once (into a stream of its own) and should
    /// not cost a task of its own. The rule is shared and checked as for ``signals(matching:bufferingPolicy:)``.
    ///
    /// - Parameters:
    ///   - handler: takes each signal; it must not block.
    ///   - ended: called once if the connection closes while the subscription lasts.
    /// - Returns: the subscription; the handler is called until it is ended or released.
    /// - Throws: ``DBusError`` as ``signals(matching:bufferingPolicy:)`` does.
    public func forwardSignals(
        matching rule: MatchRule, to handler: @escaping @Sendable (DBusMessage) -> Void,
        ended: @escaping @Sendable () -> Void = {}
    ) async throws(DBusError) -> DBusSignalSubscription {
        try await subscribe(rule, SignalSink(deliver: handler, finish: ended))
    }

    private func subscribe(_ rule: MatchRule, _ sink: SignalSink) async throws(DBusError) -> DBusSignalSubscription {
        try rule.validate()
        let id = makeID()
        let subscription = DBusSignalSubscription(loop: loop, key: rule.text, id: id)
        let loop = self.loop
        let result: Result<Void, DBusError> = await handOff { deliver in
            let accepted = loop.enqueue { loop in
                loop.subscribe(rule, id: id, sink: sink) { deliver($0) }
            }
            if !accepted { deliver(.failure(ConnectionLoop.closedError)) }
        }
        if case .failure(let error) = result { throw error }
        return subscription
    }

    // MARK: - Exported objects

    /// Exports an object: its interfaces become callable at `path`.
    ///
    /// Every object also answers `org.freedesktop.DBus.Introspectable` (XML generated from what is
    /// exported), `org.freedesktop.DBus.Properties` and `org.freedesktop.DBus.Peer`. Calls to unknown
    /// objects, interfaces, methods and properties get the standard errors, and calls whose arguments do not
    /// match the method's input types get `InvalidArgs`, before any handler runs.
    ///
    /// - Throws: ``DBusError`` `InvalidArgs` when an object is already exported at `path`, or an interface
    ///   is listed twice or is one of the standard ones; `Disconnected` once closed.
    public func export(_ interfaces: [DBusInterface], at path: ObjectPath) async throws(DBusError) {
        let names = interfaces.map(\.name.rawValue)
        guard Set(names).count == names.count else {
            throw DBusError(.invalidArgs, "an interface is listed twice for \(path)")
        }
        let reserved = ["org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.Properties", "org.freedesktop.DBus.Peer"]
        if let clash = names.first(where: reserved.contains) {
            throw DBusError(.invalidArgs, "\(clash) is provided by the connection and cannot be exported")
        }
        try await loop.perform { loop throws(DBusError) in
            guard loop.objects[path] == nil else {
                throw DBusError(.invalidArgs, "an object is already exported at \(path)")
            }
            loop.objects[path] = ExportedObject(interfaces: interfaces)
        }
    }

    /// Removes the object exported at `path`; calls to it then get `UnknownObject`.
    public func unexport(_ path: ObjectPath) async {
        _ = try? await loop.perform { loop in loop.objects[path] = nil }
    }

    /// Emits `org.freedesktop.DBus.Properties.PropertiesChanged` for properties of an exported interface.
    ///
    /// - Throws: as ``send(_:)``.
    public func emitPropertiesChanged(
        path: ObjectPath, interface: InterfaceName, changed: [MemberName: DBusValue], invalidated: [MemberName] = []
    ) throws(DBusError) {
        try send(
            ConnectionLoop.propertiesChanged(path: path, interface: interface, changed: changed, invalidated: invalidated))
    }
}

/// Removes a stream's share of a match rule exactly once, when the stream ends or is released.
/// A subscription to the signals of a match rule (``DBusConnection/forwardSignals(matching:to:ended:)``); it
/// ends when ``end()`` is called or when it is released.
public final class DBusSignalSubscription: Sendable {
    private let loop: ConnectionLoop
    private let key: String
    private let id: UInt64
    private let ended = Atomic<Bool>(false)

    init(loop: ConnectionLoop, key: String, id: UInt64) {
        self.loop = loop
        self.key = key
        self.id = id
    }

    /// Stops the deliveries and releases this subscription's share of the match rule.
    public func end() {
        guard !ended.exchange(true, ordering: .relaxed) else { return }
        let key = self.key, id = self.id
        loop.enqueue { $0.unsubscribe(key, id: id) }
    }

    deinit { end() }
}
