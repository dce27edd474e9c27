// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

/// The settings of the session, served by the `settings-broker` process over D-Bus and shared live with
/// every other process.
///
/// Making a store connects nothing: the first call connects to the bus, and the bus starts the broker by
/// D-Bus activation if it is not running. A lost connection is opened again by the next call; watches
/// reconnect and re-read by themselves, and survive a broker restart.
///
/// ```swift
/// let settings = BusSettingsStore()                       // the session bus
/// try await settings.register(.colorScheme)
/// try await settings.set(.colorScheme, to: .dark)
/// for await scheme in settings.values(for: .colorScheme) { print(scheme) }   // in any process
/// ```
///
/// - Important: Call ``close()`` when done; it ends every stream.
public final class BusSettingsStore: SettingsStore {
    let link: BrokerLink
    let hub: WatchHub
    /// The readers of the broker's view (decision 0037), one for each connection, made as it opens.
    private let views: ViewReaders

    /// The message bus a store connects to.
    ///
    /// The store's own type rather than `DBusConnection.Bus`: an app names a bus, and needs none of the
    /// connection API (or its single-peer case, on which there is no broker to reach) to do so.
    public enum Bus: Sendable, Hashable {
        /// The user's session bus (`DBUS_SESSION_BUS_ADDRESS`).
        case session
        /// The system bus.
        case system
        /// A message bus at an explicit address, such as `unix:path=/run/user/1000/bus`.
        case address(String)

        /// The connection's bus.
        var connectionBus: DBusConnection.Bus {
            switch self {
            case .session: .session
            case .system: .system
            case .address(let address): .address(address)
            }
        }
    }

    /// Makes a store on a bus; nothing is connected until the first call.
    ///
    /// - Parameters:
    ///   - bus: the session bus (the default), the system bus, or a bus at an address.
    ///   - busName: the broker's bus name: by default `SettingsBusNames.clientBusName`, the name
    ///     for sandboxed apps inside a Flatpak sandbox and the broker's own name elsewhere.
    ///   - timeout: how long a call waits for the broker.
    public init(
        bus: Bus = .session, busName: BusName = SettingsBusNames.clientBusName,
        timeout: Duration = .seconds(25)
    ) {
        let views = ViewReaders(folder: nil, busName: busName)
        self.views = views
        link = BrokerLink(bus: bus, busName: busName, timeout: timeout, opened: views.open)
        hub = WatchHub(link: link)
    }

    /// Makes a store that reads the broker's view in `viewFolder` (tests of a broker on a bus of their own).
    init(bus: Bus, timeout: Duration = .seconds(25), viewFolder: String) {
        let views = ViewReaders(folder: viewFolder, busName: SettingsBusNames.busName)
        self.views = views
        link = BrokerLink(bus: bus, busName: SettingsBusNames.busName, timeout: timeout, opened: views.open)
        hub = WatchHub(link: link)
    }

    deinit {
        hub.close()
    }

    /// Ends every stream and closes the connection; later calls fail with `Disconnected`.
    public func close() async {
        hub.close()
        await link.close()
    }

    /// Runs the tasks that prefer it on the thread of this store's connection: a stream consumed in such a
    /// task gets each change on the thread that read its signal, with no other thread woken.
    ///
    /// ```swift
    /// Task(executorPreference: settings.executor) {
    ///     for await scheme in settings.values(for: .colorScheme) { apply(scheme) }
    /// }
    /// ```
    ///
    /// - Important: While such a task runs, the connection reads nothing else: its code must not block or
    ///   wait, only await, and long work belongs in another task. Before the first call connects, and
    ///   between a lost connection and the next, its jobs run on a global dispatch queue.
    public var executor: any TaskExecutor { link }

    /// The unique bus name of this store's connection (`:1.42`): the origin its writes report.
    ///
    /// - Throws: `BrokerUnavailable` when the bus cannot be reached.
    public func uniqueName() async throws(SettingsError) -> String {
        try await link.connection().uniqueName?.rawValue ?? ""
    }

    // MARK: - SettingsStore

    /// Reads keys of one directory from the view the broker publishes, with no bus message, when there is one on
    /// this store's bus (decision 0037); else, and for a secret key, with a `GetMany`.
    public func read(_ keys: [SettingPath]) async throws(SettingsError) -> SettingsSnapshot {
        if let snapshot = try await viewReader()?.read(keys) { return snapshot }
        return SettingsSnapshot(try await link.call(Settings1.GetManyRequest(keys: keys)))
    }

    /// The reader of the broker's view for this store's connection (opened if need be); nil when there is none,
    /// or the store calls the sandboxed apps' name (a sandbox has no view).
    private func viewReader() async throws(SettingsError) -> PublishedViewReader? {
        let connection: DBusConnection
        if let open = link.openConnection { connection = open } else { connection = try await link.connection() }
        return views.reader(for: connection)
    }

    public func readTree(_ directory: SettingDirectory) async throws(SettingsError) -> SettingsSnapshot {
        SettingsSnapshot(try await link.call(Settings1.ReadTreeRequest(directory: directory)))
    }

    public func list(_ directory: SettingDirectory) async throws(SettingsError) -> [String] {
        try await link.call(Settings1.ListRequest(directory: directory)).children
    }

    @discardableResult
    public func commit(_ transaction: SettingsTransaction) async throws(SettingsError) -> UInt64 {
        let reply: Settings1.SerialReply
        if transaction.ifSerial == nil, transaction.resets.isEmpty, transaction.sets.count == 1,
            let (key, value) = transaction.sets.first
        {
            reply = try await link.call(Settings1.SetRequest(key: key, value: value))
        } else if transaction.ifSerial == nil, transaction.sets.isEmpty, transaction.resets.count == 1 {
            reply = try await link.call(Settings1.ResetRequest(location: transaction.resets[0]))
        } else {
            reply = try await link.call(
                Settings1.ApplyRequest(
                    sets: transaction.sets.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                    resets: transaction.resets, options: Settings1.ApplyOptions(ifSerial: transaction.ifSerial)))
        }
        hub.noteWrite(transaction, serial: reply.serial)
        return reply.serial
    }

    /// Sets a key from GVariant text, which the broker parses against the key's registered type (so `0.5`
    /// sets a `d` key and `['a', 'b']` an `as` key without type annotations).
    ///
    /// - Returns: the serial of the commit.
    /// - Throws: `InvalidValue` for text that does not parse, and what ``commit(_:)`` throws.
    ///
    /// Package access: `settingsctl set` takes text; an app sets typed values.
    @discardableResult
    package func setFromString(_ key: SettingPath, _ text: String) async throws(SettingsError) -> UInt64 {
        let serial = try await link.call(Settings1.SetFromStringRequest(key: key, text: text)).serial
        // The value is known only to the broker: the local copy serves the key again once it has caught up.
        var written = SettingsTransaction()
        written.reset(.key(key))
        hub.noteWrite(written, serial: serial)
        return serial
    }

    public func register(_ schemas: [SettingPath: SettingSchema], replacing: Bool) async throws(SettingsError) {
        for (key, schema) in schemas.sorted(by: { $0.key < $1.key }) {
            _ = try await link.call(Settings1.RegisterRequest(key: key, schema: schema, replacing: replacing))
        }
    }

    @discardableResult
    public func unregister(_ key: SettingPath, removingValue: Bool) async throws(SettingsError) -> UInt64 {
        let serial = try await link.call(Settings1.UnregisterRequest(key: key, removeValue: removingValue)).serial
        // The effective value is the broker's to say: the local copy serves the key again once it has caught up.
        var written = SettingsTransaction()
        written.reset(.key(key))
        hub.noteWrite(written, serial: serial)
        return serial
    }

    public func describe(_ key: SettingPath) async throws(SettingsError) -> SettingDescription {
        SettingDescription(key: key, reply: try await link.call(Settings1.DescribeRequest(key: key)))
    }

    public func updates(of location: SettingLocation) -> SettingsUpdates {
        hub.updates(of: location)
    }

    public func updates(of location: SettingLocation, keepingNewest count: Int) -> SettingsUpdates {
        hub.updates(of: location, keepingNewest: count)
    }

    public func cachedValue(of key: SettingPath) -> CachedSetting? {
        hub.cachedValue(of: key)
    }

    /// Reads the keys with one `GetMany` into the local copy, and watches each from then on, until the store
    /// is closed, so that the copy stays current: ``cachedValue(of:)`` answers them, and an
    /// ``ObservedSetting`` of one starts with its stored value. Each watch subscribes and reads its key again
    /// in the background, which finds a change committed in between.
    public func preload(_ keys: [SettingPath]) async throws(SettingsError) {
        guard !keys.isEmpty else { return }
        let snapshot = try await read(keys)
        hub.preload(snapshot, keys: keys)
    }

    /// ``ConnectionStatus/connecting`` until the store has asked the broker anything, then what its last call or
    /// watch found: ``ConnectionStatus/connected`` when the broker answered, else
    /// ``ConnectionStatus/unavailable(_:)`` (also while the broker's name has no owner).
    public var connectionStatus: ConnectionStatus { link.status.current }

    /// The connection status, then each change; while it is followed, the store follows the broker's name on
    /// the bus and asks a new owner (an empty `GetMany`), so that a broker started later is noticed even when
    /// nothing else calls. It ends when the store is closed.
    public func connectionStatuses() -> AsyncStream<ConnectionStatus> {
        link.status.statuses { [weak link] in await link?.followPresence() }
    }
}

extension SettingsSnapshot {
    /// The snapshot of a `GetMany` or `ReadTree` reply; a name that is not a key is left out.
    init(_ reply: Settings1.ValuesReply) {
        var values: [SettingPath: DBusValue] = [:]
        values.reserveCapacity(reply.values.count)
        for (name, value) in reply.values {
            guard let key = try? SettingPath(name) else { continue }
            values[key] = value
        }
        self.init(values: values, serial: reply.serial)
    }
}
