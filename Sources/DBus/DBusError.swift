// SPDX-License-Identifier: Apache-2.0

/// An error with a D-Bus error name and a message a person can act on.
///
/// Every failure of the binding is a `DBusError`: an error reply from a peer keeps the peer's name and message,
/// a call that timed out is ``Name/noReply``, a value or name that failed validation is
/// ``Name/invalidArgs``. A method handler of an exported object that throws a `DBusError` sends exactly that
/// error reply. Errors compare by name and message.
///
/// ```swift
/// do { _ = try await connection.call(…) } catch let error as DBusError where error.name == .unknownMethod { … }
/// ```
public struct DBusError: Error, Sendable, Hashable {
    /// The D-Bus error name, such as `org.freedesktop.DBus.Error.UnknownMethod`.
    public var name: Name
    /// A message for people.
    public var message: String

    /// Makes an error.
    public init(_ name: Name, _ message: String) {
        self.name = name
        self.message = message
    }

    /// A D-Bus error name. Names made in code are checked when an error reply is sent: an invalid one is sent
    /// as ``failed`` with the original name in the message.
    public struct Name: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral {
        /// The name text.
        public var rawValue: String
        /// Makes a name from its text.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// Makes a name from a literal.
        public init(stringLiteral value: String) { self.rawValue = value }

        /// `org.freedesktop.DBus.Error.Failed`: a generic failure.
        public static let failed: Name = "org.freedesktop.DBus.Error.Failed"
        /// `org.freedesktop.DBus.Error.NoReply`: no reply arrived before the call's timeout.
        public static let noReply: Name = "org.freedesktop.DBus.Error.NoReply"
        /// `org.freedesktop.DBus.Error.Timeout`: an operation other than a call timed out.
        public static let timeout: Name = "org.freedesktop.DBus.Error.Timeout"
        /// `org.freedesktop.DBus.Error.Disconnected`: the connection is closed or was lost.
        public static let disconnected: Name = "org.freedesktop.DBus.Error.Disconnected"
        /// `org.freedesktop.DBus.Error.ServiceUnknown`: no peer owns the name and none could be activated.
        public static let serviceUnknown: Name = "org.freedesktop.DBus.Error.ServiceUnknown"
        /// `org.freedesktop.DBus.Error.NameHasNoOwner`: the name has no owner.
        public static let nameHasNoOwner: Name = "org.freedesktop.DBus.Error.NameHasNoOwner"
        /// `org.freedesktop.DBus.Error.UnknownObject`: no object at that path.
        public static let unknownObject: Name = "org.freedesktop.DBus.Error.UnknownObject"
        /// `org.freedesktop.DBus.Error.UnknownInterface`: the object has no such interface.
        public static let unknownInterface: Name = "org.freedesktop.DBus.Error.UnknownInterface"
        /// `org.freedesktop.DBus.Error.UnknownMethod`: the interface has no such method.
        public static let unknownMethod: Name = "org.freedesktop.DBus.Error.UnknownMethod"
        /// `org.freedesktop.DBus.Error.UnknownProperty`: the interface has no such property.
        public static let unknownProperty: Name = "org.freedesktop.DBus.Error.UnknownProperty"
        /// `org.freedesktop.DBus.Error.PropertyReadOnly`: the property cannot be set.
        public static let propertyReadOnly: Name = "org.freedesktop.DBus.Error.PropertyReadOnly"
        /// `org.freedesktop.DBus.Error.InvalidArgs`: arguments of the wrong type or value.
        public static let invalidArgs: Name = "org.freedesktop.DBus.Error.InvalidArgs"
        /// `org.freedesktop.DBus.Error.InvalidSignature`: a malformed type signature.
        public static let invalidSignature: Name = "org.freedesktop.DBus.Error.InvalidSignature"
        /// `org.freedesktop.DBus.Error.AccessDenied`: the peer may not do this.
        public static let accessDenied: Name = "org.freedesktop.DBus.Error.AccessDenied"
        /// `org.freedesktop.DBus.Error.MatchRuleInvalid`: the bus refused a match rule.
        public static let matchRuleInvalid: Name = "org.freedesktop.DBus.Error.MatchRuleInvalid"
        /// `org.freedesktop.DBus.Error.NoMemory`: libdbus could not allocate memory.
        public static let noMemory: Name = "org.freedesktop.DBus.Error.NoMemory"
    }
}

// MARK: - CustomStringConvertible

extension DBusError: CustomStringConvertible {
    public var description: String { "\(name.rawValue): \(message)" }
}

extension DBusError.Name: CustomStringConvertible {
    public var description: String { rawValue }
}
