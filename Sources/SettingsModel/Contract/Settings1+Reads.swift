// SPDX-License-Identifier: Apache-2.0

public import DBus

// MARK: - Get

extension Settings1 {
    /// `Get(s key) → v value`: the key's user value, else its registered default, else `UnknownKey`.
    public struct GetRequest: Request {
        public typealias Reply = ValueReply
        public static let method: MemberName = "Get"
        public static let arguments = [DBusArgument("key", .string)]

        /// The key to read.
        public var key: SettingPath

        /// Makes the request.
        public init(key: SettingPath) {
            self.key = key
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "Get")
            key = try reader.key(0)
        }

        public var body: [DBusValue] { [.string(key.rawValue)] }
    }

    /// The reply of `Get`: `v value`.
    public struct ValueReply: MessageBody {
        public static let arguments = [DBusArgument("value", .variant)]

        /// The key's value.
        public var value: DBusValue

        /// Makes the reply.
        public init(value: DBusValue) {
            self.value = value
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of Get")
            value = try reader.variant(0)
        }

        public var body: [DBusValue] { [.variant(value)] }
    }
}

// MARK: - GetMany, ReadTree

extension Settings1 {
    /// `GetMany(as keys) → (a{sv} values, t serial)`: the values of several keys, read at one serial; keys
    /// without a value are left out.
    public struct GetManyRequest: Request {
        public typealias Reply = ValuesReply
        public static let method: MemberName = "GetMany"
        public static let arguments = [DBusArgument("keys", .array(.string))]

        /// The keys to read.
        public var keys: [SettingPath]

        /// Makes the request.
        public init(keys: [SettingPath]) {
            self.keys = keys
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "GetMany")
            keys = try reader.strings(0).map { text throws(SettingsError) in try SettingPath(text) }
        }

        public var body: [DBusValue] { [Settings1.strings(keys.lazy.map(\.rawValue))] }
    }

    /// `ReadTree(s dir) → (a{sv} values, t serial)`: every key with a value under a directory, recursively.
    public struct ReadTreeRequest: Request {
        public typealias Reply = ValuesReply
        public static let method: MemberName = "ReadTree"
        public static let arguments = [DBusArgument("dir", .string)]

        /// The directory to read.
        public var directory: SettingDirectory

        /// Makes the request.
        public init(directory: SettingDirectory) {
            self.directory = directory
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "ReadTree")
            directory = try reader.directory(0)
        }

        public var body: [DBusValue] { [.string(directory.rawValue)] }
    }

    /// `ReadTreeWithoutSchemaDefaults(s dir) → (a{sv} values, t serial)` (since version 4): ``ReadTreeRequest``
    /// without the keys that read their schema's default, that is every key under a directory with a value of the
    /// user's or the administrator's (a default or a lock) that it reads.
    ///
    /// A GSettings backend reads a directory so: GSettings then gives a key left out its own default (translated,
    /// or a desktop's), and `g_settings_get_user_value()` is NULL for it. ``ChangedSignal`` lists a key that comes
    /// to read its schema's default among its removed keys. Since version 5 a backend reads ``ReadTreeLayersRequest``,
    /// which also tells the administrator's defaults from the user's values.
    public struct ReadTreeWithoutSchemaDefaultsRequest: Request {
        public typealias Reply = ValuesReply
        public static let method: MemberName = "ReadTreeWithoutSchemaDefaults"
        public static let arguments = [DBusArgument("dir", .string)]
        public static var sinceVersion: UInt32 { 4 }

        /// The directory to read.
        public var directory: SettingDirectory

        /// Makes the request.
        public init(directory: SettingDirectory) {
            self.directory = directory
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "ReadTreeWithoutSchemaDefaults")
            directory = try reader.directory(0)
        }

        public var body: [DBusValue] { [.string(directory.rawValue)] }
    }

    /// `ReadTreeLayers(s dir) → (a{sv} user, a{sv} administrator, t serial)` (since version 5): the values under a
    /// directory by whose they are, as a GSettings backend keeps them. `user` holds each key whose value of the
    /// user's is served (one a lock holds back is not); `administrator` each default of the administrator's
    /// that the key's schema accepts, whether or not a value of the user's is served over it. A key in neither
    /// reads its schema's default.
    ///
    /// GSettings reads an administrator's default as a default, as from dconf's system databases:
    /// `g_settings_get_user_value()` is NULL for it and `g_settings_get_default_value()` gives it.
    public struct ReadTreeLayersRequest: Request {
        public typealias Reply = LayersReply
        public static let method: MemberName = "ReadTreeLayers"
        public static let arguments = [DBusArgument("dir", .string)]
        public static var sinceVersion: UInt32 { 5 }

        /// The directory to read.
        public var directory: SettingDirectory

        /// Makes the request.
        public init(directory: SettingDirectory) {
            self.directory = directory
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "ReadTreeLayers")
            directory = try reader.directory(0)
        }

        public var body: [DBusValue] { [.string(directory.rawValue)] }
    }

    /// The reply of `ReadTreeLayers`: `(a{sv} user, a{sv} administrator, t serial)`, read at one serial.
    public struct LayersReply: MessageBody {
        public static let arguments = [
            DBusArgument("user", Settings1.stringMap), DBusArgument("administrator", Settings1.stringMap),
            DBusArgument("serial", .uint64),
        ]

        /// Each key whose value of the user's is served, and the value, sorted by key.
        public var user: ValueMap
        /// Each key with a default of the administrator's, and the default, sorted by key.
        public var administrator: ValueMap
        /// The serial of the store's last commit when the values were read.
        public var serial: UInt64

        /// Makes the reply.
        public init(user: ValueMap, administrator: ValueMap, serial: UInt64) {
            self.user = user
            self.administrator = administrator
            self.serial = serial
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of ReadTreeLayers")
            user = try reader.map(0)
            administrator = try reader.map(1)
            serial = try reader.uint64(2)
        }

        public var body: [DBusValue] { [user.dbusValue, administrator.dbusValue, .uint64(serial)] }
    }

    /// The reply of `GetMany` and `ReadTree`: `(a{sv} values, t serial)`, the values read at one serial.
    ///
    /// The values' names are the keys as text; the reader reads them as keys (``SettingPath``) where it needs
    /// them, so a large reply is not read twice.
    public struct ValuesReply: MessageBody {
        public static let arguments = [DBusArgument("values", Settings1.stringMap), DBusArgument("serial", .uint64)]

        /// Each key with a value, and its value, sorted by key.
        public var values: ValueMap
        /// The serial of the store's last commit when the values were read.
        public var serial: UInt64

        /// Makes the reply.
        public init(values: ValueMap, serial: UInt64) {
            self.values = values
            self.serial = serial
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of GetMany or ReadTree")
            values = try reader.map(0)
            serial = try reader.uint64(1)
        }

        public var body: [DBusValue] { [values.dbusValue, .uint64(serial)] }
    }
}

// MARK: - List

extension Settings1 {
    /// `List(s dir) → as children`: the direct children of a directory, subdirectories ending in `/`.
    public struct ListRequest: Request {
        public typealias Reply = ListReply
        public static let method: MemberName = "List"
        public static let arguments = [DBusArgument("dir", .string)]

        /// The directory to list.
        public var directory: SettingDirectory

        /// Makes the request.
        public init(directory: SettingDirectory) {
            self.directory = directory
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "List")
            directory = try reader.directory(0)
        }

        public var body: [DBusValue] { [.string(directory.rawValue)] }
    }

    /// The reply of `List`: `as children`.
    public struct ListReply: MessageBody {
        public static let arguments = [DBusArgument("children", .array(.string))]

        /// The names of the children: key names, and subdirectory names ending in `/`.
        public var children: [String]

        /// Makes the reply.
        public init(children: [String]) {
            self.children = children
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of List")
            children = try reader.strings(0)
        }

        public var body: [DBusValue] { [Settings1.strings(children)] }
    }
}

// MARK: - Locks

extension Settings1 {
    /// `Locks(s dir) → as locks` (since version 3): the administrator's locks that hold keys under a directory:
    /// the locked keys and directories inside it, and a locked directory that holds it, as the lock files name
    /// them (directories ending in `/`). A GSettings app's backend reads it with a directory, so that it
    /// refuses a write of a locked key at once, before the broker would.
    public struct LocksRequest: Request {
        public typealias Reply = LocksReply
        public static let method: MemberName = "Locks"
        public static let arguments = [DBusArgument("dir", .string)]
        public static var sinceVersion: UInt32 { 3 }

        /// The directory whose keys' locks are asked for.
        public var directory: SettingDirectory

        /// Makes the request.
        public init(directory: SettingDirectory) {
            self.directory = directory
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "Locks")
            directory = try reader.directory(0)
        }

        public var body: [DBusValue] { [.string(directory.rawValue)] }
    }

    /// The reply of `Locks`: `as locks`, keys and directories (ending in `/`), sorted.
    public struct LocksReply: MessageBody {
        public static let arguments = [DBusArgument("locks", .array(.string))]

        /// The locked keys and directories.
        public var locks: [String]

        /// Makes the reply.
        public init(locks: [String]) {
            self.locks = locks
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of Locks")
            locks = try reader.strings(0)
        }

        public var body: [DBusValue] { [Settings1.strings(locks)] }
    }
}
