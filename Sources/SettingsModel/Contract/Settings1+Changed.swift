// SPDX-License-Identifier: Apache-2.0

public import DBus

extension Settings1 {
    /// The signal `Changed(s path, a{sv} values, as removed, t serial, s origin)`: one per commit.
    ///
    /// `path` is the key when one key changed, else the longest directory that holds every changed key, so a
    /// client subscribes with `arg0path` set to a key or a directory. Keys registered as secret appear in
    /// neither `values` nor `removed`, and a commit too large for one signal is announced with both empty: the
    /// watchers of its path then read what changed.
    public struct ChangedSignal: Signal {
        public static let member: MemberName = "Changed"
        public static let arguments = [
            DBusArgument("path", .string), DBusArgument("values", Settings1.stringMap),
            DBusArgument("removed", .array(.string)), DBusArgument("serial", .uint64), DBusArgument("origin", .string),
        ]

        /// The changed key, or the directory that holds every changed key.
        public var path: SettingLocation
        /// The new effective values (a reset key with a default carries the default), by key, in key order.
        public var values: ValueMap
        /// The keys left without a value of the user's: without any value, or (also in `values`, with it) with a
        /// default: their schema's (since version 4), or the administrator's default or lock (since version 5).
        public var removed: [String]
        /// The serial of the commit.
        public var serial: UInt64
        /// The unique bus name of the writer.
        public var origin: String

        /// Makes the signal.
        public init(path: SettingLocation, values: ValueMap, removed: [String], serial: UInt64, origin: String) {
            self.path = path
            self.values = values
            self.removed = removed
            self.serial = serial
            self.origin = origin
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the Changed signal")
            path = try reader.location(0)
            values = try reader.map(1)
            removed = try reader.strings(2)
            serial = try reader.uint64(3)
            origin = try reader.string(4)
        }

        public var body: [DBusValue] {
            [.string(path.rawValue), values.dbusValue, Settings1.strings(removed), .uint64(serial), .string(origin)]
        }

        /// The signal as a message from the broker's object.
        public var message: DBusMessage {
            .signal(
                path: SettingsBusNames.objectPath, interface: SettingsBusNames.interface, member: Self.member,
                body: body)
        }
    }
}

extension Settings1 {
    /// Every signal of the interface, in the order of the interface XML.
    public static let signals: [any Signal.Type] = [ChangedSignal.self, DescriptionChangedSignal.self]

    /// The signal `DescriptionChanged(s path, as keys, t serial, s origin)`: what `Describe` answers for these
    /// keys changed, other than their value. One per commit that registers, replaces or removes a schema, and one
    /// each time the administrator's defaults or locks change what a key reads or whether it can be written.
    ///
    /// `path` is the key when one key's description changed, else the longest directory that holds every such
    /// key (as in ``ChangedSignal``), so a client subscribes with `arg0path`. A change of a key's effective value
    /// is announced by ``ChangedSignal`` as well, in the same commit; this signal tells a client to call
    /// `Describe` again (a settings window greys out a key that became locked).
    public struct DescriptionChangedSignal: Signal {
        public static let member: MemberName = "DescriptionChanged"
        public static let arguments = [
            DBusArgument("path", .string), DBusArgument("keys", .array(.string)), DBusArgument("serial", .uint64),
            DBusArgument("origin", .string),
        ]

        /// The key, or the directory that holds every key whose description changed.
        public var path: SettingLocation
        /// The keys whose description changed, in key order.
        public var keys: [String]
        /// The serial of the commit, or of the store when the administrator's files changed.
        public var serial: UInt64
        /// Who changed it: the unique bus name of the registering client, `schema file PATH`, or
        /// `administrator`.
        public var origin: String

        /// Makes the signal.
        public init(path: SettingLocation, keys: [String], serial: UInt64, origin: String) {
            self.path = path
            self.keys = keys
            self.serial = serial
            self.origin = origin
        }

        /// The signal for a set of keys, with the path that covers them all (nil for none).
        public init?(keys: some Collection<SettingPath>, serial: UInt64, origin: String) {
            guard let first = keys.first else { return nil }
            let path: SettingLocation
            if keys.count == 1 {
                path = .key(first)
            } else if let directory = SettingDirectory.commonDirectory(of: keys) {
                path = .directory(directory)
            } else {
                return nil
            }
            self.init(path: path, keys: keys.map(\.rawValue).sorted(), serial: serial, origin: origin)
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the DescriptionChanged signal")
            path = try reader.location(0)
            keys = try reader.strings(1)
            serial = try reader.uint64(2)
            origin = try reader.string(3)
        }

        public var body: [DBusValue] {
            [.string(path.rawValue), Settings1.strings(keys), .uint64(serial), .string(origin)]
        }

        /// The signal as a message from the broker's object.
        public var message: DBusMessage {
            .signal(
                path: SettingsBusNames.objectPath, interface: SettingsBusNames.interface, member: Self.member,
                body: body)
        }
    }
}
