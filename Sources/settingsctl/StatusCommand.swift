// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import DBus
import Foundation
import SettingsBus
import SettingsModel

/// `settingsctl status`: prints which broker serves the bus and the state of its store.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Print the broker's bus name, pid, version, serial, store file, store health and key count.",
        discussion: """
            The owner and pid come from the bus (GetNameOwner, GetConnectionUnixProcessID), version and serial \
            from the broker's properties, and the rest from its Status method: store (the file), health (ok, \
            recovered-from-backup, recovered-empty or read-only), writable, durability, keys (user values), \
            schemas, unreadable, and when there is something to say problem, source, damaged-file, \
            damaged-backup, backup, backup-serial, backup-time (seconds since 1970) and restored; with sync on, \
            sync-state (connected, polling, offline or error), sync-queued, sync-last, sync-cursor, sync-error, \
            sync-clamped-machines and sync-refused (settingsctl sync shows these alone). A broker without a \
            Status method (one whose Version property is older than the Status method) is reported with the number of \
            keys that have a value and 'store: not reported'. \
            Starts the broker by D-Bus activation when it is not running.
            """)

    @OptionGroup var bus: BusOptions
    @OptionGroup var output: JSONOption

    static let daemon: BusName = "org.freedesktop.DBus"
    static let daemonPath: ObjectPath = "/org/freedesktop/DBus"
    /// The order of the fields of `Status`; fields not listed follow, sorted.
    static let statusOrder = [
        "serial", "store", "health", "writable", "durability", "keys", "schemas", "unreadable", "problem", "source",
        "damaged-file", "damaged-backup", "backup", "backup-serial", "backup-time", "restored", "schema-files",
        "schema-problems", "admin-files", "admin-problems", "sync-state", "sync-machine", "sync-database",
        "sync-queued", "sync-last", "sync-cursor", "sync-error", "sync-clamped-machines", "sync-refused",
    ]

    func run() async throws {
        let fields = try await bus.withStore { store in try await Self.fields(store) }
        if output.json {
            Output.json(JSONValue.object(fields.map { ($0.name, JSONValue($0.value)) }))
        } else {
            let width = fields.map(\.name.count).max()! + 2
            Output.lines(
                fields.map { field in
                    let label = field.name + ":"
                    let text: String
                    if case .string(let string) = field.value {
                        text = string
                    } else if field.name == "backup-time", case .int64(let seconds) = field.value {
                        text = Date(timeIntervalSince1970: Double(seconds)).formatted(.iso8601) + " (\(seconds))"
                    } else if field.name == "sync-last", case .int64(let milliseconds) = field.value {
                        text = Date(timeIntervalSince1970: Double(milliseconds) / 1000).formatted(.iso8601)
                            + " (\(milliseconds) ms)"
                    } else {
                        text = GVariantText.format(field.value, annotateTypes: false)
                    }
                    return label + String(repeating: " ", count: width - label.count) + text
                })
        }
    }

    /// What the bus and the broker report, in the order printed.
    static func fields(_ store: BusSettingsStore) async throws -> [(name: String, value: DBusValue)] {
        // Reading the properties starts the broker when needed; its version says whether it has a Status method.
        let properties = try await store.callOnBus(
            destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
            interface: "org.freedesktop.DBus.Properties", member: "GetAll",
            arguments: [.string(SettingsBusNames.interface.rawValue)])
        var reportedProperties: [(name: String, value: DBusValue)] = []
        if let first = properties.first, let map = Settings1.ValueMap(first) {
            for property in [Settings1.Property.version, .serial] {
                if let value = map[property.name.rawValue], value.type == property.type {
                    reportedProperties.append((property.name.rawValue.lowercased(), value))
                }
            }
        }
        var hasStatus = false
        if case .uint32(let version)? = reportedProperties.first(where: { $0.name == "version" })?.value {
            hasStatus = version >= Settings1.StatusRequest.sinceVersion
        }

        var fields: [(name: String, value: DBusValue)] = [("name", .string(SettingsBusNames.busName.rawValue))]
        let owner = try await store.callOnBus(
            destination: daemon, path: daemonPath, interface: "org.freedesktop.DBus", member: "GetNameOwner",
            arguments: [.string(SettingsBusNames.busName.rawValue)])
        if case .string(let unique)? = owner.first {
            fields.append(("owner", .string(unique)))
            if let pid = try? await store.callOnBus(
                destination: daemon, path: daemonPath, interface: "org.freedesktop.DBus",
                member: "GetConnectionUnixProcessID", arguments: [.string(unique)]
            ).first {
                fields.append(("pid", pid))
            }
        }
        fields += reportedProperties
        if hasStatus {
            let reported = try await store.call(Settings1.StatusRequest()).fields
            let names =
                statusOrder.filter { reported[$0] != nil }
                + reported.keys.filter { !statusOrder.contains($0) }.sorted()
            for name in names {
                if let index = fields.firstIndex(where: { $0.name == name }) {
                    fields[index].value = reported[name]!
                } else {
                    fields.append((name, reported[name]!))
                }
            }
        } else {
            fields.append(("keys", .uint32(UInt32(clamping: try await store.readTree(.root).values.count))))
            fields.append(("store", .string("not reported: this broker has no Status method")))
        }
        return fields
    }
}
