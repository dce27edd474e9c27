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
        /// The keys left without any value.
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
