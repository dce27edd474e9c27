// SPDX-License-Identifier: Apache-2.0

public import DBus
public import SettingsModel

/// The protocol between the broker and its sync process (`settings-sync`), on a ``MessageChannel``.
///
/// The sync process talks to the database and calls the broker; the broker answers from its store and decides
/// everything that must be decided where the data is (which keys sync, versions, schemas and locks). The sync
/// process never sees the store, nor any value the broker would not push (secret and machine-local keys never
/// enter the queue).
///
/// | call | arguments | reply |
/// | --- | --- | --- |
/// | `Hello` | `u` protocol version | `a{sv}` configuration, `x` cursor, `b` joined |
/// | `Join` | — | `u` changes queued |
/// | `Take` | `u` most changes | `a(savts)` queued changes, oldest first |
/// | `Acknowledge` | `a(savts)` changes pushed, `a(ts)` the versions the database gave them, `x` the revision the cursor moves to (-1: it stays) | `x` changes left |
/// | `Apply` | `a(xssavts)` rows pulled, `a(sss)` rows refused, `x` the revision the cursor moves to | — |
/// | `Report` (no reply) | `a{sv}` status fields (``SyncStatusField``) | — |
///
/// The broker sends one signal, `Wake`, after a commit queued changes. A change is `(key, [value] or [] for a
/// reset, clock, machine)`; a pulled row is `(revision, machine name, key, [value] or [], clock, machine)`; a
/// refused row is `(key, machine name, reason)`.
public enum SyncCall {
    /// The version of the protocol: a broker refuses a sync process that speaks another.
    public static let version: UInt32 = 2

    public static let hello: MemberName = "Hello"
    public static let join: MemberName = "Join"
    public static let take: MemberName = "Take"
    public static let acknowledge: MemberName = "Acknowledge"
    public static let apply: MemberName = "Apply"
    public static let report: MemberName = "Report"
    /// The broker's signal: changes were queued.
    public static let wake: MemberName = "Wake"

    /// The most bytes of values a reply to `Take` and a call of `Apply` carry (one change or one revision of
    /// rows more, when a single one is larger).
    public static let batchBytes = 8 << 20

    /// Why the arguments of a call cannot be read.
    public static func badArguments(_ member: MemberName, _ what: String) -> DBusError {
        DBusError(.invalidArgs, "\(member.rawValue): \(what)")
    }
}

/// The fields of `Status` that the sync process reports (``SyncCall/report``), with their types; the broker
/// takes no other.
public enum SyncStatusField {
    /// `s`: `starting`, `connected`, `polling`, `offline`, `error` or `stopped`.
    public static let state = "sync-state"
    /// `x`: when the last whole round with the database ended, in ms since 1970.
    public static let last = "sync-last"
    /// `s`: why the database cannot be used, if it cannot.
    public static let error = "sync-error"
    /// `as`: the machines whose clock the database clamped.
    public static let clampedMachines = "sync-clamped-machines"
}

/// A row pulled from the database: one change of a key, the revision the database gave it and the name of
/// the machine that wrote it.
public struct RemoteRow: Sendable {
    /// The change.
    public var change: SyncChange
    /// The database's revision of the row (the cursor moves past it).
    public var revision: Int64
    /// The writer's name, for the commit's origin `sync:<name>`.
    public var machineName: String

    /// Makes a row.
    public init(change: SyncChange, revision: Int64, machineName: String) {
        self.change = change
        self.revision = revision
        self.machineName = machineName
    }
}

/// A row pulled but not applied: what it names, and why.
public struct RefusedRow: Sendable, Hashable {
    /// The key, as the database spells it.
    public var key: String
    /// The writer's name.
    public var machineName: String
    /// Why it is refused, for people.
    public var reason: String

    /// Makes a refused row.
    public init(key: String, machineName: String, reason: String) {
        self.key = key
        self.machineName = machineName
        self.reason = reason
    }
}

// MARK: - On the channel

extension SyncChange {
    /// The D-Bus type of a change on the channel: `(savts)`.
    public static let channelType = DBusType.structure([.string, .array(.variant), .uint64, .string])

    /// The change as the channel carries it.
    public var channelValue: DBusValue {
        .structure([
            .string(key.rawValue), .array(.variant, value.map { [.variant($0)] } ?? []), .uint64(version.clock),
            .string(version.machine),
        ])
    }

    /// Reads a change from the channel.
    ///
    /// - Throws: ``SettingsError`` `InvalidKey` for a key that is not one, `InvalidValue` for anything else.
    public init(channelValue: DBusValue) throws(SettingsError) {
        guard case .structure(let fields) = channelValue, fields.count == 4, case .string(let key) = fields[0],
            case .array(.variant, let values) = fields[1], values.count <= 1, case .uint64(let clock) = fields[2],
            case .string(let machine) = fields[3]
        else { throw .invalidValue("a change is (savts): key, [value], clock, machine") }
        var value: DBusValue?
        if case .variant(let inner)? = values.first { value = inner }
        self.init(key: try SettingPath(key), value: value, version: SyncVersion(clock: clock, machine: machine))
    }
}

extension RemoteRow {
    /// The D-Bus type of a pulled row on the channel: `(xssavts)`.
    public static let channelType = DBusType.structure([.int64, .string, .string, .array(.variant), .uint64, .string])

    /// The row as the channel carries it.
    public var channelValue: DBusValue {
        guard case .structure(let change) = change.channelValue else { return .structure([]) }
        return .structure([.int64(revision), .string(machineName)] + change)
    }

    /// Reads a row from the channel.
    ///
    /// - Throws: ``SettingsError`` as ``SyncChange/init(channelValue:)``.
    public init(channelValue: DBusValue) throws(SettingsError) {
        guard case .structure(let fields) = channelValue, fields.count == 6, case .int64(let revision) = fields[0],
            case .string(let machineName) = fields[1]
        else { throw .invalidValue("a row is (xssavts): revision, machine name, key, [value], clock, machine") }
        self.init(
            change: try SyncChange(channelValue: .structure(Array(fields[2...]))), revision: revision,
            machineName: machineName)
    }
}

extension RefusedRow {
    /// The D-Bus type of a refused row on the channel: `(sss)`.
    public static let channelType = DBusType.structure([.string, .string, .string])

    /// The refused row as the channel carries it.
    public var channelValue: DBusValue { .structure([.string(key), .string(machineName), .string(reason)]) }

    /// Reads a refused row from the channel; nil when it is not `(sss)`.
    public init?(channelValue: DBusValue) {
        guard case .structure(let fields) = channelValue, fields.count == 3, case .string(let key) = fields[0],
            case .string(let machineName) = fields[1], case .string(let reason) = fields[2]
        else { return nil }
        self.init(key: key, machineName: machineName, reason: reason)
    }
}

extension SyncConfiguration {
    /// What the sync process needs of the configuration, as the broker's reply to `Hello` carries it: the
    /// database, the password file, the scope, the machine and the timings (the directories stay with the
    /// broker, which decides what syncs).
    public var channelValue: DBusValue {
        var fields: [String: DBusValue] = [
            "user": .string(database.user), "database": .string(database.database), "port": .int64(Int64(database.port)),
            "sslmode": .string(database.sslMode), "scope": .string(scope), "machine-id": .string(machineID),
            "machine-name": .string(machineName), "pull-ms": .int64(pullInterval.milliseconds),
            "settle-ms": .int64(pollSettle.milliseconds), "retry-ms": .int64(longestRetry.milliseconds),
            "clock-bound-ms": .int64(clockBoundMilliseconds),
        ]
        if let host = database.host { fields["host"] = .string(host) }
        if let folder = database.socketFolder { fields["socket-folder"] = .string(folder) }
        if let file = database.rootCertificateFile { fields["sslrootcert"] = .string(file) }
        if let passwordFile { fields["password-file"] = .string(passwordFile) }
        if let pollInterval { fields["poll-ms"] = .int64(pollInterval.milliseconds) }
        return Settings1.ValueMap(fields).dbusValue
    }

    /// Reads the configuration the broker sent.
    ///
    /// - Throws: ``SyncConfigurationError`` naming a field that is missing or of the wrong type.
    public init(channelValue: DBusValue) throws(SyncConfigurationError) {
        guard let fields = Settings1.ValueMap(channelValue)?.dictionary else {
            throw SyncConfigurationError("the configuration is not a{sv}")
        }
        func text(_ name: String) throws(SyncConfigurationError) -> String {
            guard case .string(let value)? = fields[name] else {
                throw SyncConfigurationError("the configuration has no text '\(name)'")
            }
            return value
        }
        func optionalText(_ name: String) -> String? {
            if case .string(let value)? = fields[name] { return value }
            return nil
        }
        func number(_ name: String) throws(SyncConfigurationError) -> Int64 {
            guard case .int64(let value)? = fields[name] else {
                throw SyncConfigurationError("the configuration has no number '\(name)'")
            }
            return value
        }
        func duration(_ name: String) throws(SyncConfigurationError) -> Duration {
            let value = try number(name)
            guard value >= 0 else { throw SyncConfigurationError("the configuration's '\(name)' is negative") }
            return .milliseconds(value)
        }
        let port = try number("port")
        guard (1...65535).contains(port) else { throw SyncConfigurationError("the configuration's port is \(port)") }
        let address = DatabaseAddress(
            host: optionalText("host"), socketFolder: optionalText("socket-folder"), port: Int(port), user: try text("user"),
            database: try text("database"), sslMode: try text("sslmode"), rootCertificateFile: optionalText("sslrootcert"))
        self.init(
            database: address, passwordFile: optionalText("password-file"), directories: [],
            machineID: try text("machine-id"), machineName: try text("machine-name"))
        scope = try text("scope")
        pullInterval = try duration("pull-ms")
        pollSettle = try duration("settle-ms")
        longestRetry = try duration("retry-ms")
        clockBoundMilliseconds = try number("clock-bound-ms")
        if fields["poll-ms"] != nil { pollInterval = try duration("poll-ms") }
    }
}

extension Duration {
    /// The duration in whole milliseconds, as the channel carries it (never trapping on a long one).
    var milliseconds: Int64 { DBusConnection.milliseconds(self) }
}
