// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import SettingsBus
import SettingsModel

/// `settingsctl status`: prints which broker serves the bus and the state of its store.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print the broker's bus name, pid, version, serial, key count and store health.",
        discussion: """
            The pid comes from the bus (GetConnectionUnixProcessID); serial and version from the broker's \
            properties; keys is the number of keys with a value (user values and registered defaults). \
            The store file and its health come from the broker's Status method; a broker without one \
            says so. Starts the broker by D-Bus activation when it is not running.
            """)

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    static let daemon: BusName = "org.freedesktop.DBus"
    static let daemonPath: ObjectPath = "/org/freedesktop/DBus"

    func run() async throws {
        let fields = try await bus.withStore { store in try await Self.fields(store) }
        if output.json {
            Output.lines([JSONValue.object(fields.map { ($0.name, JSONValue($0.value)) }).text])
        } else {
            let width = fields.map(\.name.count).max()! + 2
            Output.lines(
                fields.map { field in
                    let label = field.name + ":"
                    let text: String
                    if case .string(let string) = field.value {
                        text = string
                    } else {
                        text = GVariantText.format(field.value, annotateTypes: false)
                    }
                    return label + String(repeating: " ", count: width - label.count) + text
                })
        }
    }

    /// What the bus and the broker report, in the order printed.
    static func fields(_ store: BusSettingsStore) async throws -> [(name: String, value: DBusValue)] {
        // Introspection starts the broker when needed, and says whether it has a Status method.
        let introspection = try await store.callOnBus(
            destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
            interface: "org.freedesktop.DBus.Introspectable", member: "Introspect")
        var hasStatus = false
        if case .string(let xml)? = introspection.first { hasStatus = xml.contains("<method name=\"Status\">") }

        var fields: [(name: String, value: DBusValue)] = [("name", .string(SettingsBusNames.busName.rawValue))]
        let owner = try await store.callOnBus(
            destination: daemon, path: daemonPath, interface: "org.freedesktop.DBus", member: "GetNameOwner",
            arguments: [.string(SettingsBusNames.busName.rawValue)])
        if case .string(let unique)? = owner.first {
            fields.append(("owner", .string(unique)))
            if let pid = try? await store.callOnBus(
                destination: daemon, path: daemonPath, interface: "org.freedesktop.DBus",
                member: "GetConnectionUnixProcessID", arguments: [.string(unique)]).first
            {
                fields.append(("pid", pid))
            }
        }
        let properties = try await store.callOnBus(
            destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
            interface: "org.freedesktop.DBus.Properties", member: "GetAll",
            arguments: [.string(SettingsBusNames.interface.rawValue)])
        if case .dictionary(.string, .variant, let entries)? = properties.first {
            for name in ["Version", "Serial"] {
                if let entry = entries.first(where: { $0.key == .string(name) }), case .variant(let value) = entry.value {
                    fields.append((name.lowercased(), value))
                }
            }
        }
        fields.append(("keys", .uint32(UInt32(clamping: try await store.readTree(.root).values.count))))

        if hasStatus {
            let reply = try await store.callBroker("Status", [])
            if case .dictionary(.string, .variant, let entries)? = reply.first {
                for entry in entries {
                    guard case .string(let name) = entry.key, case .variant(let value) = entry.value else { continue }
                    if let index = fields.firstIndex(where: { $0.name == name }) {
                        fields[index].value = value
                    } else {
                        fields.append((name, value))
                    }
                }
            }
        } else {
            fields.append(("store", .string("not reported: this broker has no Status method")))
        }
        return fields
    }
}
