// SPDX-License-Identifier: Apache-2.0

public import DBus

// MARK: - Register

extension Settings1 {
    /// `Register(s key, s signature, v default, a{sv} options)`: registers the type, default and options of a
    /// key (its ``SettingSchema``).
    ///
    /// With option `no-default` (b) true the key has no default (no value until one is set): `default` is then
    /// ignored, but must still have the signature's type (pass any value of the type).
    ///
    /// Reading a request checks that the default has the signature's type and reads the options; whether the
    /// schema is sound (a range for a numeric type, choices of the key's type, sizes) is checked by
    /// ``SettingSchema/validate(for:)``, where the schema is registered.
    public struct RegisterRequest: Request {
        public typealias Reply = EmptyReply
        public static let method: MemberName = "Register"
        public static let arguments = [
            DBusArgument("key", .string), DBusArgument("signature", .string), DBusArgument("default", .variant),
            DBusArgument("options", Settings1.stringMap),
        ]

        /// The key to register.
        public var key: SettingPath
        /// The key's type.
        public var type: DBusType
        /// The `default` argument, of that type; ignored when ``RegisterOptions/noDefault`` is true.
        public var defaultValue: DBusValue
        /// The options: the rest of the schema, and whether it replaces an incompatible one.
        public var options: RegisterOptions

        /// Makes the request.
        public init(key: SettingPath, type: DBusType, defaultValue: DBusValue, options: RegisterOptions = .init()) {
            self.key = key
            self.type = type
            self.defaultValue = defaultValue
            self.options = options
        }

        /// Makes the request that registers a schema.
        ///
        /// - Parameter replacing: whether the schema replaces an incompatible one (option `replace`).
        public init(key: SettingPath, schema: SettingSchema, replacing: Bool = false) {
            self.init(
                key: key, type: schema.type, defaultValue: schema.defaultValue ?? .placeholder(of: schema.type),
                options: RegisterOptions(
                    summary: schema.summary, description: schema.description, range: schema.range,
                    choices: schema.choices, isSecret: schema.isSecret, replace: replacing,
                    noDefault: schema.defaultValue == nil, isMachineLocal: schema.isMachineLocal))
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "Register")
            key = try reader.key(0)
            let text = try reader.string(1)
            let value = try reader.variant(2)
            do {
                type = try DBusType(parsing: text)
            } catch {
                throw .invalidValue("invalid signature '\(text)' for \(key): \(error.message)")
            }
            guard value.type == type else {
                throw .typeMismatch("the default for \(key) has type '\(value.type)', but the signature is '\(type)'")
            }
            defaultValue = value
            options = try RegisterOptions(try reader.map(3), for: key)
        }

        public var body: [DBusValue] {
            [
                .string(key.rawValue), .string(type.signatureText), .variant(defaultValue),
                options.map(type: type).dbusValue,
            ]
        }

        /// The schema the request registers (not yet validated).
        public var schema: SettingSchema {
            SettingSchema(
                type: type, defaultValue: options.noDefault ? nil : defaultValue, summary: options.summary, description: options.description,
                range: options.range, choices: options.choices, isSecret: options.isSecret,
                isMachineLocal: options.isMachineLocal)
        }
    }

    /// The options of `Register`.
    ///
    /// A range travels as `min` and `max`, or as `range`, a structure `(min, max)`; choices as an array of the
    /// key's type.
    public struct RegisterOptions: Sendable, Hashable {
        /// The names of the options `Register` knows.
        public static let names = [
            "summary", "description", "range", "min", "max", "choices", "secret", "replace", "no-default",
            "machine-local",
        ]

        /// `summary` (s): a one-line summary for people.
        public var summary: String?
        /// `description` (s): a longer description for people.
        public var description: String?
        /// `min` and `max`, or `range`: the inclusive range of accepted values, of the key's numeric type.
        public var range: SettingRange?
        /// `choices` (an array of the key's type): the only values accepted.
        public var choices: [DBusValue]?
        /// `secret` (b): whether the key's values are kept out of signals and from other users.
        public var isSecret: Bool
        /// `replace` (b): whether the schema replaces an incompatible one instead of failing with
        /// `SchemaConflict`.
        public var replace: Bool
        /// `no-default` (b): whether the key has no default, so no value until one is set; `Register`'s
        /// `default` argument is then ignored (any value of the key's type).
        public var noDefault: Bool
        /// `machine-local` (b): whether the key's values stay on the machine when the broker syncs its directory
        /// with other machines.
        public var isMachineLocal: Bool

        /// Makes options.
        public init(
            summary: String? = nil, description: String? = nil, range: SettingRange? = nil,
            choices: [DBusValue]? = nil, isSecret: Bool = false, replace: Bool = false, noDefault: Bool = false,
            isMachineLocal: Bool = false
        ) {
            self.isMachineLocal = isMachineLocal
            self.noDefault = noDefault
            self.summary = summary
            self.description = description
            self.range = range
            self.choices = choices
            self.isSecret = isSecret
            self.replace = replace
        }

        /// Reads the options of a call for a key.
        ///
        /// - Throws: `InvalidValue` for an option `Register` does not know, one of the wrong type, or a range
        ///   with only one bound.
        public init(_ map: ValueMap, for key: SettingPath) throws(SettingsError) {
            self.init()
            var minimum: DBusValue?, maximum: DBusValue?
            for (name, option) in map {
                switch (name, option) {
                case ("replace", .boolean(let replace)): self.replace = replace
                case ("summary", .string(let summary)): self.summary = summary
                case ("description", .string(let description)): self.description = description
                case ("secret", .boolean(let secret)): isSecret = secret
                case ("no-default", .boolean(let noDefault)): self.noDefault = noDefault
                case ("machine-local", .boolean(let local)): isMachineLocal = local
                case ("min", _): minimum = option
                case ("max", _): maximum = option
                case ("range", .structure(let bounds)) where bounds.count == 2:
                    minimum = bounds[0]
                    maximum = bounds[1]
                case ("choices", .array(_, let choices)): self.choices = choices
                case _ where Self.names.contains(name):
                    throw .invalidValue("option '\(name)' of \(key) has the wrong type '\(option.type)'")
                default:
                    throw .invalidValue(
                        "unknown Register option '\(name)' for \(key); known: \(Self.names.joined(separator: ", "))")
                }
            }
            switch (minimum, maximum) {
            case (let min?, let max?): range = SettingRange(min: min, max: max)
            case (nil, nil): break
            default: throw .invalidValue("a range for \(key) needs both min and max")
            }
        }

        /// The options as they travel for a key of a type: only those that are set, a range as `min` and `max`.
        public func map(type: DBusType) -> ValueMap {
            var options: [(String, DBusValue)] = []
            if let summary { options.append(("summary", .string(summary))) }
            if let description { options.append(("description", .string(description))) }
            if let range {
                options.append(("min", range.min))
                options.append(("max", range.max))
            }
            if let choices { options.append(("choices", .array(type, choices))) }
            if isSecret { options.append(("secret", .boolean(true))) }
            if replace { options.append(("replace", .boolean(true))) }
            if noDefault { options.append(("no-default", .boolean(true))) }
            if isMachineLocal { options.append(("machine-local", .boolean(true))) }
            return ValueMap(options)
        }
    }

    /// The reply of a method that answers with no values (`Register`).
    public struct EmptyReply: MessageBody {
        public static let arguments: [DBusArgument] = []

        /// Makes the reply.
        public init() {}

        public init(_ body: [DBusValue]) throws(SettingsError) {
            _ = try BodyReader(body, Self.arguments, "the reply of Register")
        }

        public var body: [DBusValue] { [] }
    }
}

// MARK: - Unregister

extension Settings1 {
    /// `Unregister(s key, a{sv} options) → t serial`: removes the schema of a key. Its user value is kept, and
    /// served as it is, unless option `remove-value` (b) is true. A key with neither a schema nor a value is
    /// `UnknownKey`.
    public struct UnregisterRequest: Request {
        public typealias Reply = SerialReply
        public static let method: MemberName = "Unregister"
        public static let arguments = [DBusArgument("key", .string), DBusArgument("options", Settings1.stringMap)]

        /// The key whose schema is removed.
        public var key: SettingPath
        /// `remove-value` (b): whether the key's user value is removed too.
        public var removeValue: Bool

        /// The names of the options `Unregister` knows.
        public static let optionNames = ["remove-value"]

        /// Makes the request.
        public init(key: SettingPath, removeValue: Bool = false) {
            self.key = key
            self.removeValue = removeValue
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "Unregister")
            key = try reader.key(0)
            removeValue = false
            for (name, option) in try reader.map(1) {
                switch (name, option) {
                case ("remove-value", .boolean(let remove)): removeValue = remove
                case ("remove-value", _):
                    throw .invalidValue("option 'remove-value' of \(key) has the wrong type '\(option.type)'")
                default:
                    throw .invalidValue(
                        "unknown Unregister option '\(name)' for \(key); known: \(Self.optionNames.joined(separator: ", "))")
                }
            }
        }

        public var body: [DBusValue] {
            [.string(key.rawValue), ValueMap(removeValue ? [("remove-value", .boolean(true))] : []).dbusValue]
        }
    }
}

// MARK: - Describe

extension Settings1 {
    /// `Describe(s key) → a{sv} description`: what the broker knows about a key.
    public struct DescribeRequest: Request {
        public typealias Reply = DescribeReply
        public static let method: MemberName = "Describe"
        public static let arguments = [DBusArgument("key", .string)]

        /// The key to describe.
        public var key: SettingPath

        /// Makes the request.
        public init(key: SettingPath) {
            self.key = key
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "Describe")
            key = try reader.key(0)
        }

        public var body: [DBusValue] { [.string(key.rawValue)] }
    }

    /// The reply of `Describe`: an `a{sv}` of fields.
    ///
    /// The fields travel in this order, each only when it has something to say: `writable` (b), `registered`
    /// (b), `signature` (s), then for a registered key `default` (none for a key without a default), `summary` (s), `description` (s), `range`
    /// (`(min, max)`), `choices` (an array of the key's type), `secret` (b) and `machine-local` (b, only when
    /// true), then `value` (the user value,
    /// never a secret key's), `value-ignored` (s: why the stored value is not served) and `serial` (t: the
    /// key's last change). Fields this version does not know are kept in ``otherFields``.
    public struct DescribeReply: MessageBody {
        public static let arguments = [DBusArgument("description", Settings1.stringMap)]

        /// The names of the fields this version reads, in the order they travel.
        public static let fieldNames = [
            "writable", "registered", "signature", "default", "summary", "description", "range", "choices",
            "secret", "machine-local", "value", "value-ignored", "serial", "locked", "administrator-default", "source",
        ]

        /// `writable`: whether the key may be written.
        public var writable: Bool
        /// The registered schema (fields `registered`, `default`, `summary`, `description`, `range`, `choices`
        /// and `secret`), if any.
        public var schema: SettingSchema?
        /// `signature`: the key's type, the registered one, else the user value's.
        public var signature: DBusType?
        /// `value`: the user value, if any and if the key is not secret.
        public var value: DBusValue?
        /// `value-ignored`: why the stored value is not served (the key then reads its default).
        public var valueIgnored: String?
        /// `serial`: the serial of the key's last change, when the broker knows it.
        public var serial: UInt64?
        /// `locked`: the administrator's lock on the key, as `FILE, line N`; nil when it is not locked.
        public var locked: String?
        /// `administrator-default`: the administrator's default for the key, if any.
        public var administratorDefault: DBusValue?
        /// `source`: where the value `Get` returns comes from: `user`, `administrator` (the administrator's
        /// default), `schema` (the registered default), or `none` (no value).
        public var source: String?
        /// Fields this version does not know, from a newer broker.
        public var otherFields: [String: DBusValue]

        /// Makes the reply.
        public init(
            writable: Bool, schema: SettingSchema?, signature: DBusType?, value: DBusValue? = nil,
            valueIgnored: String? = nil, serial: UInt64? = nil, otherFields: [String: DBusValue] = [:]
        ) {
            self.writable = writable
            self.schema = schema
            self.signature = signature
            self.value = value
            self.valueIgnored = valueIgnored
            self.serial = serial
            self.otherFields = otherFields
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of Describe")
            var fields = try reader.map(0).dictionary
            func take<T>(_ name: String, _ what: String, _ read: (DBusValue) -> T?) throws(SettingsError) -> T? {
                guard let value = fields.removeValue(forKey: name) else { return nil }
                guard let typed = read(value) else {
                    throw .invalidValue("field '\(name)' of the reply of Describe must be \(what), not '\(value.type)'")
                }
                return typed
            }
            func bool(_ value: DBusValue) -> Bool? { if case .boolean(let flag) = value { flag } else { nil } }
            func string(_ value: DBusValue) -> String? { if case .string(let text) = value { text } else { nil } }

            writable = try take("writable", "a boolean", bool) ?? true
            let registered = try take("registered", "a boolean", bool) ?? false
            let signatureText = try take("signature", "a string", string)
            if let signatureText {
                do throws(DBusError) {
                    signature = try DBusType(parsing: signatureText)
                } catch {
                    throw .invalidValue(
                        "field 'signature' of the reply of Describe is not a signature: \(error.message)")
                }
            } else {
                signature = nil
            }
            let defaultValue = fields.removeValue(forKey: "default")
            let summary = try take("summary", "a string", string)
            let description = try take("description", "a string", string)
            let range = try take("range", "a structure (min, max)") { value -> SettingRange? in
                guard case .structure(let bounds) = value, bounds.count == 2 else { return nil }
                return SettingRange(min: bounds[0], max: bounds[1])
            }
            let choices = try take("choices", "an array") { value -> [DBusValue]? in
                if case .array(_, let choices) = value { choices } else { nil }
            }
            let secret = try take("secret", "a boolean", bool)
            let machineLocal = try take("machine-local", "a boolean", bool)
            if registered {
                guard let type = signature ?? defaultValue?.type else {
                    throw .invalidValue(
                        "the reply of Describe says the key is registered, but has neither 'signature' nor 'default'")
                }
                schema = SettingSchema(
                    type: type, defaultValue: defaultValue, summary: summary, description: description, range: range,
                    choices: choices, isSecret: secret ?? false, isMachineLocal: machineLocal ?? false)
            } else {
                schema = nil
            }
            value = fields.removeValue(forKey: "value")
            valueIgnored = try take("value-ignored", "a string", string)
            serial = try take("serial", "a uint64 (t)") { value -> UInt64? in
                if case .uint64(let number) = value { number } else { nil }
            }
            locked = try take("locked", "a string", string)
            administratorDefault = fields.removeValue(forKey: "administrator-default")
            source = try take("source", "a string", string)
            otherFields = fields
        }

        public var body: [DBusValue] {
            var fields: [(String, DBusValue)] = [("writable", .boolean(writable))]
            fields.append(("registered", .boolean(schema != nil)))
            if let signature { fields.append(("signature", .string(signature.signatureText))) }
            if let schema {
                if let defaultValue = schema.defaultValue { fields.append(("default", defaultValue)) }
                if let summary = schema.summary { fields.append(("summary", .string(summary))) }
                if let text = schema.description { fields.append(("description", .string(text))) }
                if let range = schema.range { fields.append(("range", .structure([range.min, range.max]))) }
                if let choices = schema.choices { fields.append(("choices", .array(schema.choiceType, choices))) }
                fields.append(("secret", .boolean(schema.isSecret)))
                if schema.isMachineLocal { fields.append(("machine-local", .boolean(true))) }
            }
            if let value { fields.append(("value", value)) }
            if let valueIgnored { fields.append(("value-ignored", .string(valueIgnored))) }
            if let serial { fields.append(("serial", .uint64(serial))) }
            if let locked { fields.append(("locked", .string(locked))) }
            if let administratorDefault { fields.append(("administrator-default", administratorDefault)) }
            if let source { fields.append(("source", .string(source))) }
            fields += otherFields.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            return [ValueMap(fields).dbusValue]
        }

        /// The fields as they travel, in that order: those of this version, then ``otherFields``.
        public var fields: ValueMap {
            ValueMap(body[0]) ?? ValueMap()
        }
    }
}

extension DBusValue {
    /// A value of a type, for an argument whose value is ignored (`Register`'s `default` with option
    /// `no-default`): zero, empty or false, and a structure of such values.
    public static func placeholder(of type: DBusType) -> DBusValue {
        switch type {
        case .byte: .byte(0)
        case .boolean: .boolean(false)
        case .int16: .int16(0)
        case .uint16: .uint16(0)
        case .int32: .int32(0)
        case .uint32: .uint32(0)
        case .int64: .int64(0)
        case .uint64: .uint64(0)
        case .double: .double(0)
        case .string: .string("")
        case .objectPath: .objectPath("/")
        case .signature: .signature(Signature(types: []))
        case .variant: .variant(.boolean(false))
        case .array(let element): .array(element, [])
        case .dictionary(let key, let value): .dictionary(key: key, value: value, [])
        case .structure(let fields): .structure(fields.map(placeholder(of:)))
        }
    }
}
