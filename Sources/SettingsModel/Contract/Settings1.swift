// SPDX-License-Identifier: Apache-2.0

public import DBus

/// The `io.github.settingsbus.Settings1` D-Bus contract, written once: each method's request and reply, the
/// `Changed` signal and the properties, as typed values.
///
/// The broker decodes every call into a request value and answers with a reply value; the client library and
/// `settingsctl` encode the same request values and decode the same replies, so no side encodes or decodes a
/// message body by hand. Each type states its D-Bus arguments (``MessageBody/arguments``): the broker's exported
/// methods and signal are made from them, and a test checks them against the interface XML in `dbus/`.
///
/// ```swift
/// let request = Settings1.SetRequest(key: try SettingPath("/org/example/theme"), value: .string("dark"))
/// let reply = try await connection.call(
///     destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
///     interface: SettingsBusNames.interface, member: Settings1.SetRequest.method, arguments: request.body)
/// let serial = try Settings1.SerialReply(reply).serial
/// ```
///
/// Decoding checks the number and the types of the arguments and reads keys by their grammar. A body that does
/// not fit throws the ``SettingsError`` the broker answers such a call with: `InvalidKey` for a key or
/// directory argument that is not one, `InvalidValue` (or `TypeMismatch`) for any other argument, and
/// `InvalidValue` for the wrong number of arguments. The message names the method and the argument.
///
/// To add a method, add its request type (and a reply type, unless one of the existing replies fits) here, list
/// it in ``requests``, and give the broker a handler for it. To add an option, add it to the options type of its
/// request (``ApplyOptions``, ``RegisterOptions``).
public enum Settings1 {
    /// The interface's version, reported by the `Version` property: a method added to the interface after
    /// version 1 says since which version it exists (``Request/sinceVersion``). An incompatible change is a new
    /// interface, `Settings2`.
    public static let version: UInt32 = 5

    /// The request type of every method of the interface, in the order of the interface XML.
    public static let requests: [any Request.Type] = [
        GetRequest.self, GetManyRequest.self, ReadTreeRequest.self, ListRequest.self, SetRequest.self,
        SetFromStringRequest.self, ApplyRequest.self, ResetRequest.self, RegisterRequest.self, UnregisterRequest.self,
        DescribeRequest.self, StatusRequest.self, HistoryRequest.self, LocksRequest.self,
        ReadTreeWithoutSchemaDefaultsRequest.self, ReadTreeLayersRequest.self,
    ]

    /// The `a{sv}` type of the maps of values, options and fields.
    public static let stringMap = DBusType.dictionary(key: .string, value: .variant)

    // MARK: - Protocols

    /// A value that travels as the body of a message of the interface: a request, a reply or a signal.
    ///
    /// `T(value.body) == value` for every value, and ``body`` has exactly the types of ``arguments``.
    public protocol MessageBody: Sendable, Equatable {
        /// The arguments of the body, with the names the interface XML gives them.
        static var arguments: [DBusArgument] { get }

        /// Reads a body, checking the number of arguments, their types and the grammar of the keys in them.
        ///
        /// - Throws: ``SettingsError`` naming the bad argument: `InvalidKey` for a key or directory argument,
        ///   `InvalidValue` or `TypeMismatch` for another (see ``Settings1``).
        init(_ body: [DBusValue]) throws(SettingsError)

        /// The values of the message body.
        var body: [DBusValue] { get }
    }

    /// The request of a method: its arguments, with the method's name and the type of its reply.
    public protocol Request: MessageBody {
        /// The reply the method answers with.
        associatedtype Reply: MessageBody

        /// The method's name.
        static var method: MemberName { get }

        /// The interface version that brought the method (the `Version` property of a broker that has it is at
        /// least this); 1 for the methods of the first version.
        static var sinceVersion: UInt32 { get }
    }

    /// A signal of the interface.
    public protocol Signal: MessageBody {
        /// The signal's name.
        static var member: MemberName { get }
    }

    // MARK: - Properties

    /// A property of the interface, read through `org.freedesktop.DBus.Properties`.
    public struct Property: Sendable, Hashable {
        /// The property's name.
        public var name: MemberName
        /// The property's type.
        public var type: DBusType

        /// `Serial` (t): the serial of the store's last commit.
        public static let serial = Property(name: "Serial", type: .uint64)
        /// `Version` (u): the interface's version, ``Settings1/version``.
        public static let version = Property(name: "Version", type: .uint32)
    }
}

extension Settings1.Request {
    /// The interface version that brought the method: 1.
    public static var sinceVersion: UInt32 { 1 }

    /// The method's input arguments, ``Settings1/MessageBody/arguments``.
    public static var inputs: [DBusArgument] { arguments }

    /// The method's output arguments, the reply's ``Settings1/MessageBody/arguments``.
    public static var outputs: [DBusArgument] { Reply.arguments }

    /// Reads the method's reply.
    ///
    /// - Throws: `InvalidValue` for a reply that is not what the method answers.
    public static func reply(_ body: [DBusValue]) throws(SettingsError) -> Reply {
        try Reply(body)
    }
}

// MARK: - Reading a body

extension Settings1 {
    /// Reads the arguments of a body against the arguments its type states, and names the one that does not
    /// fit in the error it throws.
    struct BodyReader {
        /// What the body is, for messages: `Get`, `the reply of Get`, `the Changed signal`.
        let subject: String
        let arguments: [DBusArgument]
        let body: [DBusValue]

        /// Checks the number of arguments.
        ///
        /// - Throws: `InvalidValue` when there are more or fewer than `arguments`.
        init(_ body: [DBusValue], _ arguments: [DBusArgument], _ subject: String) throws(SettingsError) {
            self.subject = subject
            self.arguments = arguments
            self.body = body
            guard body.count == arguments.count else {
                let carried = Signature(types: body.map(\.type))
                throw .invalidValue(
                    "\(subject) takes \(Self.describe(arguments)), but \(body.count) "
                        + "\(body.count == 1 ? "argument" : "arguments") came ('\(carried)')")
            }
        }

        /// `(s key, v value)`.
        static func describe(_ arguments: [DBusArgument]) -> String {
            "(" + arguments.map { "\($0.type.signatureText) \($0.name)" }.joined(separator: ", ") + ")"
        }

        /// The error for argument `index`, which does not have the stated type.
        func wrongType(
            _ index: Int, _ code: SettingsError.Code = .invalidValue, _ what: String? = nil
        ) -> SettingsError {
            let argument = arguments[index]
            return SettingsError(
                code,
                "argument '\(argument.name)' of \(subject) must be \(what ?? Self.describe(argument.type)), "
                    + "not '\(body[index].type.signatureText)'")
        }

        /// `a string`, `a variant`, `a uint64 (t)`.
        static func describe(_ type: DBusType) -> String {
            switch type {
            case .string: return "a string"
            case .variant: return "a variant"
            case .uint64: return "a uint64 (t)"
            case .array(.string): return "a list of strings (as)"
            case .dictionary(.string, .variant): return "a dictionary a{sv}"
            default: return "'\(type.signatureText)'"
            }
        }

        func string(_ index: Int) throws(SettingsError) -> String {
            guard case .string(let text) = body[index] else { throw wrongType(index) }
            return text
        }

        func uint64(_ index: Int) throws(SettingsError) -> UInt64 {
            guard case .uint64(let number) = body[index] else { throw wrongType(index) }
            return number
        }

        func variant(_ index: Int) throws(SettingsError) -> DBusValue {
            guard case .variant(let value) = body[index] else { throw wrongType(index) }
            return value
        }

        /// A key (`s`); a string that is not one is `InvalidKey`.
        func key(_ index: Int) throws(SettingsError) -> SettingPath {
            guard case .string(let text) = body[index] else {
                throw wrongType(index, .invalidKey, "a key string")
            }
            return try SettingPath(text)
        }

        /// A directory (`s`, ending in `/`).
        func directory(_ index: Int) throws(SettingsError) -> SettingDirectory {
            guard case .string(let text) = body[index] else {
                throw wrongType(index, .invalidKey, "a directory string")
            }
            return try SettingDirectory(text)
        }

        /// A key or a directory (`s`).
        func location(_ index: Int) throws(SettingsError) -> SettingLocation {
            guard case .string(let text) = body[index] else {
                throw wrongType(index, .invalidKey, "a key or directory string")
            }
            return try SettingLocation(text)
        }

        /// A list of strings (`as`).
        func strings(_ index: Int) throws(SettingsError) -> [String] {
            guard case .array(.string, let elements) = body[index] else { throw wrongType(index) }
            var strings: [String] = []
            strings.reserveCapacity(elements.count)
            for element in elements {
                guard case .string(let text) = element else { throw wrongType(index) }
                strings.append(text)
            }
            return strings
        }

        /// A map of names to values (`a{sv}`).
        func map(_ index: Int) throws(SettingsError) -> ValueMap {
            guard let map = ValueMap(body[index]) else { throw wrongType(index) }
            return map
        }
    }
}

// MARK: - Writing a body

extension Settings1 {
    /// `as`.
    static func strings(_ strings: some Sequence<String>) -> DBusValue {
        .array(.string, strings.map(DBusValue.string))
    }
}
