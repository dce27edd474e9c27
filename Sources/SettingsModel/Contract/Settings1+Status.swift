// SPDX-License-Identifier: Apache-2.0

public import DBus

extension Settings1 {
    /// `Status() → a{sv} status`: the store file and its health.
    public struct StatusRequest: Request {
        public typealias Reply = StatusReply
        public static let method: MemberName = "Status"
        public static let arguments: [DBusArgument] = []

        /// Makes the request.
        public init() {}

        public init(_ body: [DBusValue]) throws(SettingsError) {
            _ = try BodyReader(body, Self.arguments, "Status")
        }

        public var body: [DBusValue] { [] }
    }

    /// The reply of `Status`: an `a{sv}` of fields, sorted by name.
    ///
    /// The fields are the store's (`store`, `health`, `writable`, `durability`, `serial`, `keys`, `schemas`,
    /// `unreadable`, and when there is something to say `problem`, `source`, `damaged-file`, `damaged-backup`,
    /// `backup`, `backup-serial`, `backup-time`, `restored`) and the broker's (`schema-files`,
    /// `schema-problems`); the interface XML in `dbus/` says what each means. The set grows with the broker,
    /// so they are kept by name.
    public struct StatusReply: MessageBody {
        public static let arguments = [DBusArgument("status", Settings1.stringMap)]

        /// The fields by name.
        public var fields: [String: DBusValue]

        /// Makes the reply.
        public init(fields: [String: DBusValue]) {
            self.fields = fields
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of Status")
            fields = try reader.map(0).dictionary
        }

        public var body: [DBusValue] { [ValueMap(fields).dbusValue] }
    }
}
