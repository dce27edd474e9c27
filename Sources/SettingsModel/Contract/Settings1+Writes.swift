// SPDX-License-Identifier: Apache-2.0

public import DBus

// MARK: - Set, SetFromString

extension Settings1 {
    /// `Set(s key, v value) → t serial`: sets one key.
    public struct SetRequest: Request {
        public typealias Reply = SerialReply
        public static let method: MemberName = "Set"
        public static let arguments = [DBusArgument("key", .string), DBusArgument("value", .variant)]

        /// The key to set.
        public var key: SettingPath
        /// Its new value.
        public var value: DBusValue

        /// Makes the request.
        public init(key: SettingPath, value: DBusValue) {
            self.key = key
            self.value = value
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "Set")
            let value = try reader.variant(1)
            key = try reader.key(0)
            self.value = value
        }

        public var body: [DBusValue] { [.string(key.rawValue), .variant(value)] }
    }

    /// `SetFromString(s key, s text) → t serial`: sets one key from GVariant text, which the broker parses
    /// against the key's registered type.
    public struct SetFromStringRequest: Request {
        public typealias Reply = SerialReply
        public static let method: MemberName = "SetFromString"
        public static let arguments = [DBusArgument("key", .string), DBusArgument("text", .string)]

        /// The key to set.
        public var key: SettingPath
        /// Its new value in GVariant text, such as `['a', 'b']`.
        public var text: String

        /// Makes the request.
        public init(key: SettingPath, text: String) {
            self.key = key
            self.text = text
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "SetFromString")
            key = try reader.key(0)
            text = try reader.string(1)
        }

        public var body: [DBusValue] { [.string(key.rawValue), .string(text)] }
    }
}

// MARK: - Apply

extension Settings1 {
    /// `Apply(a{sv} set, as reset, a{sv} options) → t serial`: sets and resets keys in one atomic commit, with
    /// one `Changed` signal.
    public struct ApplyRequest: Request {
        public typealias Reply = SerialReply
        public static let method: MemberName = "Apply"
        public static let arguments = [
            DBusArgument("set", Settings1.stringMap), DBusArgument("reset", .array(.string)),
            DBusArgument("options", Settings1.stringMap),
        ]

        /// The keys to set, with their values, in the order they travel.
        public var sets: [(key: SettingPath, value: DBusValue)]
        /// The keys and directories to reset (a directory resets every key below it).
        public var resets: [SettingLocation]
        /// The options.
        public var options: ApplyOptions

        /// Makes the request.
        public init(
            sets: [(key: SettingPath, value: DBusValue)] = [], resets: [SettingLocation] = [],
            options: ApplyOptions = ApplyOptions()
        ) {
            self.sets = sets
            self.resets = resets
            self.options = options
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "Apply")
            let map = try reader.map(0)
            var sets: [(key: SettingPath, value: DBusValue)] = []
            sets.reserveCapacity(map.count)
            for (name, value) in map { sets.append((try SettingPath(name), value)) }
            self.sets = sets
            resets = try reader.strings(1).map { text throws(SettingsError) in try SettingLocation(text) }
            options = try ApplyOptions(try reader.map(2))
        }

        public var body: [DBusValue] {
            [
                ValueMap(sets.lazy.map { ($0.key.rawValue, $0.value) }).dbusValue,
                Settings1.strings(resets.lazy.map(\.rawValue)), options.map.dbusValue,
            ]
        }

        public static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.sets.elementsEqual(rhs.sets) { $0.key == $1.key && $0.value == $1.value }
                && lhs.resets == rhs.resets && lhs.options == rhs.options
        }
    }

    /// The options of `Apply`.
    public struct ApplyOptions: Sendable, Hashable {
        /// The names of the options `Apply` knows.
        public static let names = ["if-serial"]

        /// `if-serial` (t): the commit fails with `Conflict` if a key it touches changed after this serial
        /// (compare-and-set).
        public var ifSerial: UInt64?

        /// Makes options.
        public init(ifSerial: UInt64? = nil) {
            self.ifSerial = ifSerial
        }

        /// Reads the options of a call.
        ///
        /// - Throws: `InvalidValue` for an option `Apply` does not know, or one of the wrong type.
        public init(_ map: ValueMap) throws(SettingsError) {
            for (name, value) in map {
                switch (name, value) {
                case ("if-serial", .uint64(let serial)): ifSerial = serial
                case ("if-serial", _):
                    throw .invalidValue("option if-serial takes a uint64 (t), not '\(value.type)'")
                default:
                    throw .invalidValue(
                        "unknown option '\(name)'; Apply knows: \(Self.names.joined(separator: ", "))")
                }
            }
        }

        /// The options as they travel: only those that are set.
        public var map: ValueMap {
            var options: [(String, DBusValue)] = []
            if let ifSerial { options.append(("if-serial", .uint64(ifSerial))) }
            return ValueMap(options)
        }
    }
}

// MARK: - Reset

extension Settings1 {
    /// `Reset(s keyOrDir) → t serial`: removes the user value of a key, or of every key under a directory.
    public struct ResetRequest: Request {
        public typealias Reply = SerialReply
        public static let method: MemberName = "Reset"
        public static let arguments = [DBusArgument("keyOrDir", .string)]

        /// The key or directory to reset.
        public var location: SettingLocation

        /// Makes the request.
        public init(location: SettingLocation) {
            self.location = location
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "Reset")
            location = try reader.location(0)
        }

        public var body: [DBusValue] { [.string(location.rawValue)] }
    }
}

// MARK: - The serial of a write

extension Settings1 {
    /// The reply of `Set`, `SetFromString`, `Apply` and `Reset`: `t serial`, the serial of the commit.
    public struct SerialReply: MessageBody {
        public static let arguments = [DBusArgument("serial", .uint64)]

        /// The serial of the commit.
        public var serial: UInt64

        /// Makes the reply.
        public init(serial: UInt64) {
            self.serial = serial
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of a write")
            serial = try reader.uint64(0)
        }

        public var body: [DBusValue] { [.uint64(serial)] }
    }
}
