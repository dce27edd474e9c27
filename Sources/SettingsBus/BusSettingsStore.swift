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
    ///   - busName: the broker's bus name.
    ///   - timeout: how long a call waits for the broker.
    public init(
        bus: Bus = .session, busName: BusName = SettingsBusNames.busName,
        timeout: Duration = .seconds(25)
    ) {
        link = BrokerLink(bus: bus, busName: busName, timeout: timeout)
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

    public func read(_ keys: [SettingPath]) async throws(SettingsError) -> SettingsSnapshot {
        try Self.snapshot(try await link.call("GetMany", [.array(.string, keys.map { .string($0.rawValue) })]))
    }

    public func readTree(_ directory: SettingDirectory) async throws(SettingsError) -> SettingsSnapshot {
        try Self.snapshot(try await link.call("ReadTree", [.string(directory.rawValue)]))
    }

    public func list(_ directory: SettingDirectory) async throws(SettingsError) -> [String] {
        let reply = try await link.call("List", [.string(directory.rawValue)])
        guard reply.count == 1, case .array(.string, let names) = reply[0] else {
            throw .invalidValue("List returned an unexpected reply: \(reply)")
        }
        return names.compactMap { if case .string(let name) = $0 { name } else { nil } }
    }

    @discardableResult
    public func commit(_ transaction: SettingsTransaction) async throws(SettingsError) -> UInt64 {
        let reply: [DBusValue]
        if transaction.ifSerial == nil, transaction.resets.isEmpty, transaction.sets.count == 1,
            let (key, value) = transaction.sets.first
        {
            reply = try await link.call("Set", [.string(key.rawValue), .variant(value)])
        } else if transaction.ifSerial == nil, transaction.sets.isEmpty, transaction.resets.count == 1 {
            reply = try await link.call("Reset", [.string(transaction.resets[0].rawValue)])
        } else {
            var options: [DBusDictEntry] = []
            if let serial = transaction.ifSerial {
                options.append(DBusDictEntry(key: .string("if-serial"), value: .variant(.uint64(serial))))
            }
            let sets = transaction.sets.sorted { $0.key < $1.key }.map {
                DBusDictEntry(key: .string($0.key.rawValue), value: .variant($0.value))
            }
            reply = try await link.call(
                "Apply",
                [
                    .dictionary(key: .string, value: .variant, sets),
                    .array(.string, transaction.resets.map { .string($0.rawValue) }),
                    .dictionary(key: .string, value: .variant, options),
                ])
        }
        guard reply.count == 1, case .uint64(let serial) = reply[0] else {
            throw .invalidValue("the broker returned an unexpected reply: \(reply)")
        }
        hub.noteWrite(transaction, serial: serial)
        return serial
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
        let reply = try await link.call("SetFromString", [.string(key.rawValue), .string(text)])
        guard reply.count == 1, case .uint64(let serial) = reply[0] else {
            throw .invalidValue("the broker returned an unexpected reply: \(reply)")
        }
        // The value is known only to the broker: the local copy serves the key again once it has caught up.
        var written = SettingsTransaction()
        written.reset(.key(key))
        hub.noteWrite(written, serial: serial)
        return serial
    }

    /// Calls any method of the broker's interface, for tools that need one the typed API does not cover.
    ///
    /// - Throws: ``SettingsError`` mapped from the reply.
    package func callBroker(_ member: MemberName, _ arguments: [DBusValue]) async throws(SettingsError) -> [DBusValue] {
        try await link.call(member, arguments)
    }

    public func register(_ schemas: [SettingPath: SettingSchema], replacing: Bool) async throws(SettingsError) {
        for (key, schema) in schemas.sorted(by: { $0.key < $1.key }) {
            var options: [(String, DBusValue)] = []
            if let summary = schema.summary { options.append(("summary", .string(summary))) }
            if let description = schema.description { options.append(("description", .string(description))) }
            if let range = schema.range {
                options.append(("min", range.min))
                options.append(("max", range.max))
            }
            if let choices = schema.choices { options.append(("choices", .array(schema.type, choices))) }
            if schema.isSecret { options.append(("secret", .boolean(true))) }
            if replacing { options.append(("replace", .boolean(true))) }
            _ = try await link.call(
                "Register",
                [
                    .string(key.rawValue), .string(schema.type.signatureText), .variant(schema.defaultValue),
                    .dictionary(
                        key: .string, value: .variant,
                        options.map { DBusDictEntry(key: .string($0.0), value: .variant($0.1)) }),
                ])
        }
    }

    public func describe(_ key: SettingPath) async throws(SettingsError) -> SettingDescription {
        let reply = try await link.call("Describe", [.string(key.rawValue)])
        guard reply.count == 1 else { throw .invalidValue("Describe returned \(reply.count) values") }
        return try SettingDescription(key: key, describeReply: reply[0])
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

    /// Reads a `(a{sv} values, t serial)` reply.
    static func snapshot(_ reply: [DBusValue]) throws(SettingsError) -> SettingsSnapshot {
        guard reply.count == 2, case .dictionary(.string, .variant, let entries) = reply[0],
            case .uint64(let serial) = reply[1]
        else {
            throw .invalidValue("the broker returned an unexpected reply: \(reply)")
        }
        var values: [SettingPath: DBusValue] = [:]
        values.reserveCapacity(entries.count)
        for entry in entries {
            guard case .string(let text) = entry.key, case .variant(let value) = entry.value,
                let key = try? SettingPath(text)
            else { continue }
            values[key] = value
        }
        return SettingsSnapshot(values: values, serial: serial)
    }
}
