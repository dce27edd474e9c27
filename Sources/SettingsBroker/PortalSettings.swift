// SPDX-License-Identifier: Apache-2.0

import DBus
import Logging
import SettingsModel
import Synchronization

/// The desktop portal's Settings backend (`org.freedesktop.impl.portal.Settings`, decision 0033): the
/// `org.freedesktop.appearance` namespace, served from the keys under `/org/freedesktop/appearance/`, so that
/// every sandboxed app asking `xdg-desktop-portal` for the desktop's appearance gets what the broker holds.
///
/// The broker owns `org.freedesktop.impl.portal.desktop.settingsbus` on the session bus and serves the object
/// `/org/freedesktop/portal/desktop`; `dbus/settingsbus.portal` names it to `xdg-desktop-portal` (see
/// `docs/sandboxed-apps.md` for the `portals.conf` line that selects it). A key whose value does not have the
/// portal's exact type is left out, as a key with no value is; `SettingChanged` is sent only when the value an
/// app reads really changes, with that value: a key left out is announced with the portal's default for it
/// (``defaults``), so that apps stop using the value it had.
final class PortalSettings: Sendable {
    /// The backend's bus name.
    static let busName: BusName = "org.freedesktop.impl.portal.desktop.settingsbus"
    /// The object every portal backend serves.
    static let objectPath: ObjectPath = "/org/freedesktop/portal/desktop"
    static let interfaceName: InterfaceName = "org.freedesktop.impl.portal.Settings"
    /// The one namespace served.
    static let namespace = "org.freedesktop.appearance"
    /// The directory its keys are in.
    static let directory = "/org/freedesktop/appearance/"

    /// Each key of the namespace and its exact type.
    static let keys: [(name: String, type: DBusType)] = [
        ("color-scheme", .uint32),
        ("accent-color", .structure([.double, .double, .double])),
        ("contrast", .uint32),
        ("reduced-motion", .uint32),
    ]

    /// What an app takes a key the backend leaves out for (the portal's documentation of each key): no
    /// preference, and an accent colour out of range, which means none.
    static let defaults: [String: DBusValue] = [
        "color-scheme": .uint32(0),
        "accent-color": .structure([.double(-1), .double(-1), .double(-1)]),
        "contrast": .uint32(0),
        "reduced-motion": .uint32(0),
    ]

    private let store: DurableStore
    private let logger: Logger
    /// The last value announced (or read at start) of each key, so that a commit that writes the same value
    /// again announces nothing.
    private let announced = Mutex<[String: DBusValue]>([:])
    private let connection = Mutex<DBusConnection?>(nil)

    init(store: DurableStore, logger: Logger) {
        self.store = store
        self.logger = logger
        announced.withLock { $0 = Self.values(in: store) }
    }

    /// The namespace's values in the store: each key with a value of its exact type.
    static func values(in store: DurableStore) -> [String: DBusValue] {
        var values: [String: DBusValue] = [:]
        for (name, type) in keys {
            guard let key = try? SettingPath(directory + name), let value = try? store.get(key), value.type == type
            else { continue }
            values[name] = value
        }
        return values
    }

    /// Whether a namespace pattern of `ReadAll` selects the namespace: equal, empty (all), or a prefix ending in
    /// `*`.
    static func selects(_ pattern: String) -> Bool {
        if pattern.isEmpty || pattern == namespace { return true }
        guard pattern.hasSuffix("*") else { return false }
        return namespace.hasPrefix(pattern.dropLast())
    }

    var interface: DBusInterface {
        DBusInterface(
            name: Self.interfaceName,
            methods: [
                DBusMethod(
                    name: "ReadAll", inputs: [DBusArgument("namespaces", .array(.string))],
                    outputs: [DBusArgument("value", .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)))],
                    immediate: { [store] call in
                        guard case .array(_, let patterns) = call.arguments[0] else { return [] }
                        let asked = patterns.compactMap { if case .string(let text) = $0 { text } else { nil } }
                        var namespaces: [DBusDictEntry] = []
                        if asked.isEmpty || asked.contains(where: Self.selects) {
                            let values = Self.values(in: store).sorted { $0.key < $1.key }.map {
                                DBusDictEntry(key: .string($0.key), value: .variant($0.value))
                            }
                            namespaces.append(
                                DBusDictEntry(
                                    key: .string(Self.namespace),
                                    value: .dictionary(key: .string, value: .variant, values)))
                        }
                        return [.dictionary(key: .string, value: .dictionary(key: .string, value: .variant), namespaces)]
                    }),
                DBusMethod(
                    name: "Read", inputs: [DBusArgument("namespace", .string), DBusArgument("key", .string)],
                    outputs: [DBusArgument("value", .variant)],
                    immediate: { [store] call in
                        guard case .string(let namespace) = call.arguments[0], case .string(let key) = call.arguments[1],
                            namespace == Self.namespace, let value = Self.values(in: store)[key]
                        else {
                            throw DBusError(
                                "org.freedesktop.portal.Error.NotFound", "the requested setting was not found")
                        }
                        return [.variant(value)]
                    }),
            ],
            signals: [
                DBusSignal(
                    name: "SettingChanged",
                    arguments: [
                        DBusArgument("namespace", .string), DBusArgument("key", .string), DBusArgument("value", .variant),
                    ])
            ],
            properties: [
                DBusProperty(name: "version", type: .uint32, changeSignal: .constant) { .uint32(1) }
            ])
    }

    /// Serves the backend on the connection: its object, then its name. A name another process holds, or one
    /// the bus's policy does not let the broker own, is logged, and the broker serves on without it.
    func serve(on connection: DBusConnection) async throws {
        try await connection.export([interface], at: Self.objectPath)
        let reply: RequestNameReply
        do {
            reply = try await connection.requestName(Self.busName, flags: [.doNotQueue])
        } catch {
            logger.warning(
                "\(Self.busName) cannot be owned on this bus: the desktop portal is not served from this broker",
                metadata: ["error": "\(error)"])
            return
        }
        guard reply == .primaryOwner else {
            logger.warning("\(Self.busName) is owned by another process: the desktop portal is not served from this broker")
            return
        }
        self.connection.withLock { $0 = connection }
    }

    func stop() async {
        let connection = self.connection.withLock { connection in
            defer { connection = nil }
            return connection
        }
        _ = try? await connection?.releaseName(Self.busName)
    }

    /// Announces the namespace's keys a commit changed, each whose value really changed.
    func announce(_ change: CommittedChange) {
        guard let connection = connection.withLock({ $0 }) else { return }
        let touched = change.values.contains { $0.key.hasPrefix(Self.directory) }
            || change.removed.contains { $0.hasPrefix(Self.directory) }
        guard touched else { return }
        let now = Self.values(in: store)
        // What an app reads of each key, before and after: a key left out reads as its default.
        let changed = announced.withLock { announced in
            defer { announced = now }
            return Self.keys.compactMap { key -> (String, DBusValue)? in
                let before = announced[key.name] ?? Self.defaults[key.name]
                guard let after = now[key.name] ?? Self.defaults[key.name], after != before else { return nil }
                return (key.name, after)
            }
        }
        for (key, value) in changed {
            let signal = DBusMessage.signal(
                path: Self.objectPath, interface: Self.interfaceName, member: "SettingChanged",
                body: [.string(Self.namespace), .string(key), .variant(value)])
            do { try connection.send(signal) } catch {
                logger.error("cannot emit SettingChanged", metadata: ["key": "\(key)", "error": "\(error)"])
            }
        }
    }
}
