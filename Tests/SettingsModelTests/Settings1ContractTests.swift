// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsModel
import Testing

/// The typed `Settings1` contract without a bus: every request, reply and signal reads back what it writes,
/// refuses a body of the wrong arity or types with the named error, and states the arguments of the interface
/// XML in `dbus/`.
struct Settings1ContractTests {
    /// A value of a contract type, with what the tests need to know of its type.
    struct Sample: Sendable, CustomStringConvertible {
        let type: any Settings1.MessageBody.Type
        let body: [DBusValue]
        /// Whether the value read back from `body` equals the one that wrote it.
        let readsBack: @Sendable () throws -> Bool
        /// Reads a body as this sample's type.
        let read: @Sendable ([DBusValue]) throws(SettingsError) -> Void
        /// Reads a body as this sample's type, and returns whether what it read reads back from its own body.
        let readsBackWhatItRead: @Sendable ([DBusValue]) throws(SettingsError) -> Bool
        let description: String

        init<T: Settings1.MessageBody>(_ value: T, _ label: String = "") {
            type = T.self
            body = value.body
            readsBack = { [body] in try T(body) == value }
            read = { body throws(SettingsError) in _ = try T(body) }
            readsBackWhatItRead = { body throws(SettingsError) in
                let value = try T(body)
                return (try? T(value.body)) == value
            }
            description = "\(T.self)\(label.isEmpty ? "" : " (\(label))")"
        }
    }

    static func key(_ text: String) -> SettingPath { try! SettingPath(text) }
    static func directory(_ text: String) -> SettingDirectory { try! SettingDirectory(text) }

    static let schema = SettingSchema(
        defaultValue: .int32(12), summary: "Font size", description: "In points.",
        range: SettingRange(min: .int32(8), max: .int32(72)), choices: [.int32(10), .int32(12)], isSecret: true)

    /// At least one value of every request, reply and signal type, with their options set and unset.
    static let samples: [Sample] = [
        Sample(Settings1.GetRequest(key: key("/org/example/theme"))),
        Sample(Settings1.ValueReply(value: .array(.string, [.string("a")]))),
        Sample(Settings1.GetManyRequest(keys: [key("/a/b"), key("/a/c")])),
        Sample(Settings1.GetManyRequest(keys: []), "no keys"),
        Sample(Settings1.ReadTreeRequest(directory: .root)),
        Sample(
            Settings1.ValuesReply(
                values: Settings1.ValueMap(["/a/b": .int32(1), "/a/c": .structure([.string("x"), .boolean(true)])]),
                serial: 42)),
        Sample(Settings1.ValuesReply(values: [:], serial: 0), "empty"),
        Sample(Settings1.ListRequest(directory: directory("/org/example/"))),
        Sample(Settings1.ListReply(children: ["theme", "fonts/"])),
        Sample(Settings1.LocksRequest(directory: directory("/org/example/"))),
        Sample(Settings1.LocksReply(locks: ["/org/", "/org/example/kiosk/wallpaper"])),
        Sample(Settings1.ReadTreeWithoutSchemaDefaultsRequest(directory: directory("/org/gnome/desktop/interface/"))),
        Sample(Settings1.ReadTreeLayersRequest(directory: directory("/org/gnome/desktop/interface/"))),
        Sample(
            Settings1.LayersReply(
                user: Settings1.ValueMap(["/a/b": .int32(1)]),
                administrator: Settings1.ValueMap(["/a/b": .int32(2), "/a/c": .string("x")]), serial: 9)),
        Sample(Settings1.LayersReply(user: [:], administrator: [:], serial: 0), "empty"),
        Sample(Settings1.SetRequest(key: key("/org/example/theme"), value: .variant(.string("dark")))),
        Sample(Settings1.SetFromStringRequest(key: key("/org/example/ids"), text: "[1, 2]")),
        Sample(
            Settings1.ApplyRequest(
                sets: [(key("/a/b"), .int32(1)), (key("/a/c"), .string("x"))],
                resets: [.key(key("/a/d")), .directory(directory("/a/e/"))],
                options: Settings1.ApplyOptions(ifSerial: 7))),
        Sample(Settings1.ApplyRequest(), "empty, no options"),
        Sample(Settings1.ResetRequest(location: .directory(directory("/org/example/")))),
        Sample(Settings1.ResetRequest(location: .key(key("/org/example/theme"))), "a key"),
        Sample(Settings1.SerialReply(serial: .max)),
        Sample(Settings1.RegisterRequest(key: key("/org/example/size"), schema: schema, replacing: true)),
        Sample(
            Settings1.RegisterRequest(key: key("/org/example/name"), type: .string, defaultValue: .string("")),
            "no options"),
        Sample(
            Settings1.RegisterRequest(
                key: key("/org/example/home"), schema: SettingSchema(type: .string, defaultValue: nil, summary: "Home")),
            "no default"),
        Sample(Settings1.EmptyReply()),
        Sample(Settings1.UnregisterRequest(key: key("/org/example/size"), removeValue: true)),
        Sample(Settings1.UnregisterRequest(key: key("/org/example/size")), "keeping the value"),
        Sample(Settings1.DescribeRequest(key: key("/org/example/size"))),
        Sample(
            Settings1.DescribeReply(
                writable: true, schema: schema, signature: .int32, value: .int32(100),
                valueIgnored: "value 100 is out of range", serial: 9, otherFields: ["later": .string("field")])),
        Sample(Settings1.DescribeReply(writable: false, schema: nil, signature: nil), "unknown key"),
        Sample(
            Settings1.DescribeReply(
                writable: true, schema: SettingSchema(type: .array(.string), defaultValue: nil), signature: .array(.string)),
            "no default"),
        Sample(
            Settings1.DescribeReply(writable: true, schema: nil, signature: .string, value: .string("x")),
            "unregistered"),
        Sample(Settings1.StatusRequest()),
        Sample(Settings1.StatusReply(fields: ["health": .string("ok"), "keys": .uint32(3)])),
        Sample(Settings1.HistoryRequest()),
        Sample(
            Settings1.HistoryRequest(
                location: .key(key("/org/example/theme")), sinceSerial: 4, sinceTime: 1_700_000_000_000_000, limit: 10),
            "a key, a serial, a time and a limit"),
        Sample(
            Settings1.HistoryReply(commits: [
                .init(
                    serial: 7, time: 1_700_000_000_000_000, writer: ":1.4", process: "gdbus", pid: 42,
                    changes: [
                        .init(key: "/a/b", old: nil, new: .int32(1)), .init(key: "/a/c", old: .string("x"), new: nil),
                        .init(key: "/a/token", omitted: "secret", old: nil, new: nil),
                    ]),
                .init(serial: 8, time: 1_700_000_000_000_001, writer: ":1.5", process: "", pid: 0, changes: []),
            ])),
        Sample(Settings1.HistoryReply(commits: []), "no commits"),
        Sample(
            Settings1.ChangedSignal(
                path: .directory(directory("/a/")), values: ["/a/b": .int32(1)], removed: ["/a/c"], serial: 3,
                origin: ":1.7")),
        Sample(
            Settings1.ChangedSignal(path: .key(key("/a/b")), values: [:], removed: [], serial: 4, origin: ""),
            "nothing carried"),
        Sample(
            Settings1.DescriptionChangedSignal(
                path: .directory(directory("/a/")), keys: ["/a/b", "/a/c/d"], serial: 5, origin: "administrator")),
    ]

    /// Every type of the contract: each method's request and reply, and the signal.
    static var allTypes: [any Settings1.MessageBody.Type] {
        var types: [any Settings1.MessageBody.Type] = Settings1.signals
        for request in Settings1.requests {
            types.append(request)
            types.append(replyType(of: request))
        }
        return types
    }

    static func replyType(of request: any Settings1.Request.Type) -> any Settings1.MessageBody.Type {
        func reply<R: Settings1.Request>(_: R.Type) -> any Settings1.MessageBody.Type { R.Reply.self }
        return reply(request)
    }

    // MARK: - Round trips

    @Test(arguments: samples)
    func readsBackWhatItWrites(_ sample: Sample) throws {
        #expect(try sample.readsBack())
        #expect(sample.body.map(\.type) == sample.type.arguments.map(\.type), "the body has the stated types")
    }

    @Test func everyTypeHasASample() {
        let sampled = Set(Self.samples.map { ObjectIdentifier($0.type) })
        for type in Self.allTypes {
            #expect(sampled.contains(ObjectIdentifier(type)), "no sample of \(type)")
        }
    }

    @Test func methodNamesAreDistinctAndEveryMethodIsOfAVersionUpToTheInterfaces() {
        let names = Settings1.requests.map { $0.method.rawValue }
        #expect(Set(names).count == names.count)
        #expect(Settings1.requests.allSatisfy { $0.sinceVersion <= Settings1.version })
    }

    @Test func aLargeMapIsReadByPositionAndByName() {
        let values = Settings1.ValueMap((0..<1000).map { ("/big/k\($0)", DBusValue.uint32(UInt32($0))) })
        let reply = Settings1.ValuesReply(values: values, serial: 1)
        let read = try? Settings1.ValuesReply(reply.body)
        #expect(read?.values.count == 1000)
        #expect(read?.values[999].name == "/big/k999")
        #expect(read?.values["/big/k5"] == .uint32(5))
        #expect(read?.values.dictionary.count == 1000)
    }

    // MARK: - Bodies that do not fit

    @Test(arguments: samples)
    func aBodyOfTheWrongArityIsInvalidValue(_ sample: Sample) {
        let longer = sample.body + [.int32(0)]
        let error = #expect(throws: SettingsError.self) { try sample.read(longer) }
        #expect(error?.code == .invalidValue)
        #expect(error?.message.contains("but \(longer.count) argument") == true, "\(error?.message ?? "")")
        if !sample.body.isEmpty {
            let shorter = Array(sample.body.dropLast())
            let error = #expect(throws: SettingsError.self) { try sample.read(shorter) }
            #expect(error?.code == .invalidValue)
        }
    }

    /// Each argument in turn replaced by a value of another type: the error names the argument, and is
    /// `InvalidKey` for a key or directory, as the broker has always answered.
    @Test(arguments: samples)
    func anArgumentOfTheWrongTypeIsNamed(_ sample: Sample) {
        for (index, argument) in sample.type.arguments.enumerated() {
            var body = sample.body
            body[index] = argument.type == .int32 ? .boolean(true) : .int32(1)
            let error = #expect(throws: SettingsError.self, "\(sample) argument \(argument.name)") {
                try sample.read(body)
            }
            let isKey = argument.type == .string && ["key", "dir", "keyOrDir", "path"].contains(argument.name)
            #expect(error?.code == (isKey ? .invalidKey : .invalidValue), "\(sample) \(argument.name)")
            #expect(error?.message.contains("argument '\(argument.name)'") == true, "\(error?.message ?? "")")
        }
    }

    /// Random bodies, mostly of the stated types and with names the contract knows: reading one never traps
    /// (the broker reads what any peer sends), and what is read reads back from its own body.
    @Test func randomBodiesAreReadOrRefusedAndWhatIsReadReadsBack() throws {
        let names = [
            "/a", "/a/b", "/", "/a/", "/a/b/", "", "a", "/a//b", "/a b", "if-serial", "summary", "description", "min",
            "max", "range", "choices", "secret", "replace", "writable", "registered", "signature", "default", "value",
            "value-ignored", "serial", "health",
        ]
        var generator = DBusValueGenerator(seed: 0x5e771_9651)
        var read = 0
        for sample in Self.samples {
            for _ in 0..<300 {
                func pick<T>(_ choices: [T]) -> T {
                    choices[Int.random(in: 0..<choices.count, using: &generator.random)]
                }
                func count() -> Int { Int.random(in: 0...3, using: &generator.random) }
                func text() -> String {
                    if Bool.random(using: &generator.random) { return pick(names) }
                    if case .string(let text) = generator.value(of: .string) { return text }
                    return ""
                }
                func value(of type: DBusType) -> DBusValue {
                    switch type {
                    case .string: return .string(text())
                    case .array(.string):
                        return .array(.string, (0..<count()).map { _ in .string(text()) })
                    case .dictionary(.string, .variant):
                        let types: [DBusType] = [
                            .uint64, .boolean, .string, .int32, .structure([.int32, .int32]), .array(.int32),
                        ]
                        return Settings1.ValueMap(
                            (0..<count()).map { _ in
                                let known = Bool.random(using: &generator.random)
                                return (text(), known ? generator.value(of: pick(types)) : generator.value())
                            }
                        ).dbusValue
                    default: return generator.value(of: type)
                    }
                }
                var body = sample.type.arguments.map { value(of: $0.type) }
                if Int.random(in: 0..<8, using: &generator.random) == 0 {
                    body = (0..<Int.random(in: 0...5, using: &generator.random)).map { _ in generator.value() }
                } else if !body.isEmpty, Int.random(in: 0..<8, using: &generator.random) == 0 {
                    body[Int.random(in: 0..<body.count, using: &generator.random)] = generator.value()
                }
                do {
                    #expect(try sample.readsBackWhatItRead(body), "\(sample): \(body)")
                    read += 1
                } catch {
                    #expect(!error.message.isEmpty)
                }
            }
        }
        #expect(read > 1000, "most random bodies were refused: the test reads too little")
    }

    @Test func aMapWithAnotherValueTypeIsRefused() {
        let map = DBusValue.dictionary(
            key: .string, value: .string, [DBusDictEntry(key: .string("a"), value: .string("b"))])
        #expect(Settings1.ValueMap(map) == nil)
        #expect(throws: SettingsError.invalidValue("")) { try Settings1.StatusReply([map]) }
    }

    @Test(arguments: [
        ([DBusValue.string("org/example/theme")], "GetRequest"),
        ([.string("/org/example/")], "GetRequest"),
        ([.array(.string, [.string("/a"), .string("/a//b")])], "GetManyRequest"),
        ([.string("/org/example")], "ReadTreeRequest"),
        ([.string("/a b/")], "ListRequest"),
        ([.string("/a/"), .variant(.int32(1))], "SetRequest"),
        ([.string(""), .string("1")], "SetFromStringRequest"),
        ([.string("/a//")], "ResetRequest"),
    ])
    func aStringThatIsNotAKeyIsInvalidKey(_ body: [DBusValue], _ type: String) {
        let read: [String: ([DBusValue]) throws(SettingsError) -> Void] = [
            "GetRequest": { body throws(SettingsError) in _ = try Settings1.GetRequest(body) },
            "GetManyRequest": { body throws(SettingsError) in _ = try Settings1.GetManyRequest(body) },
            "ReadTreeRequest": { body throws(SettingsError) in _ = try Settings1.ReadTreeRequest(body) },
            "ListRequest": { body throws(SettingsError) in _ = try Settings1.ListRequest(body) },
            "SetRequest": { body throws(SettingsError) in _ = try Settings1.SetRequest(body) },
            "SetFromStringRequest": { body throws(SettingsError) in _ = try Settings1.SetFromStringRequest(body) },
            "ResetRequest": { body throws(SettingsError) in _ = try Settings1.ResetRequest(body) },
        ]
        #expect(throws: SettingsError.invalidKey("")) { try read[type]!(body) }
    }

    // MARK: - Apply

    static func apply(
        sets: [(String, DBusValue)] = [], resets: [String] = [], options: [(String, DBusValue)]
    ) -> [DBusValue] {
        [
            Settings1.ValueMap(sets).dbusValue, .array(.string, resets.map(DBusValue.string)),
            Settings1.ValueMap(options).dbusValue,
        ]
    }

    @Test func applyNamesAnUnknownOptionAndTheTypeOfIfSerial() {
        let unknown = #expect(throws: SettingsError.self) {
            try Settings1.ApplyRequest(Self.apply(options: [("if-newer", .uint64(1))]))
        }
        #expect(unknown?.code == .invalidValue)
        #expect(unknown?.message == "unknown option 'if-newer'; Apply knows: if-serial")
        let wrong = #expect(throws: SettingsError.self) {
            try Settings1.ApplyRequest(Self.apply(options: [("if-serial", .int32(1))]))
        }
        #expect(wrong?.code == .invalidValue)
        #expect(wrong?.message == "option if-serial takes a uint64 (t), not 'i'")
        #expect(throws: SettingsError.invalidKey("")) {
            try Settings1.ApplyRequest(Self.apply(sets: [("/a/", .int32(1))], options: []))
        }
        #expect(throws: SettingsError.invalidKey("")) {
            try Settings1.ApplyRequest(Self.apply(resets: ["a"], options: []))
        }
    }

    @Test func applyKeepsTheOrderOfItsSetsAndResets() throws {
        let request = try Settings1.ApplyRequest(
            Self.apply(sets: [("/z", .int32(1)), ("/a", .int32(2))], resets: ["/m/", "/b"], options: []))
        #expect(request.sets.map(\.key.rawValue) == ["/z", "/a"])
        #expect(request.resets.map(\.rawValue) == ["/m/", "/b"])
        #expect(request.options.ifSerial == nil)
    }

    // MARK: - Register

    static func register(
        _ signature: String = "i", _ defaultValue: DBusValue = .int32(12), options: [(String, DBusValue)] = []
    ) -> [DBusValue] {
        [
            .string("/org/example/size"), .string(signature), .variant(defaultValue),
            Settings1.ValueMap(options).dbusValue,
        ]
    }

    @Test func registerReadsEveryOption() throws {
        let request = try Settings1.RegisterRequest(
            Self.register(options: [
                ("summary", .string("Font size")), ("description", .string("In points.")),
                ("range", .structure([.int32(8), .int32(72)])), ("choices", .array(.int32, [.int32(10)])),
                ("secret", .boolean(true)), ("replace", .boolean(true)),
            ]))
        #expect(
            request.schema
                == SettingSchema(
                    defaultValue: .int32(12), summary: "Font size", description: "In points.",
                    range: SettingRange(min: .int32(8), max: .int32(72)), choices: [.int32(10)], isSecret: true))
        #expect(request.options.replace)
        let separate = try Settings1.RegisterRequest(Self.register(options: [("min", .int32(1)), ("max", .int32(2))]))
        #expect(separate.options.range == SettingRange(min: .int32(1), max: .int32(2)))
    }

    @Test(arguments: [
        (Settings1ContractTests.register("i", .string("x")), SettingsError.Code.typeMismatch,
         "the default for /org/example/size has type 's', but the signature is 'i'"),
        (register("a{", .int32(1)), .invalidValue, "invalid signature 'a{' for /org/example/size"),
        (register(options: [("min", .int32(1))]), .invalidValue,
         "a range for /org/example/size needs both min and max"),
        (register(options: [("summary", .int32(1))]), .invalidValue,
         "option 'summary' of /org/example/size has the wrong type 'i'"),
        (register(options: [("range", .structure([.int32(1)]))]), .invalidValue,
         "option 'range' of /org/example/size has the wrong type '(i)'"),
        (register(options: [("colour", .string("red"))]), .invalidValue,
         "unknown Register option 'colour' for /org/example/size; known: summary, description, range, min, max, "
            + "choices, secret, replace"),
    ])
    func registerRefusesWhatTheBrokerRefuses(_ body: [DBusValue], _ code: SettingsError.Code, _ message: String) {
        let error = #expect(throws: SettingsError.self) { try Settings1.RegisterRequest(body) }
        #expect(error?.code == code)
        #expect(error?.message.hasPrefix(message) == true, "\(error?.message ?? "")")
    }

    // MARK: - Describe

    @Test func describeReadsWhatAnOlderOrNewerBrokerSends() throws {
        // A broker that sends fewer fields: writable by default, no schema.
        let sparse = try Settings1.DescribeReply([Settings1.ValueMap().dbusValue])
        #expect(sparse == Settings1.DescribeReply(writable: true, schema: nil, signature: nil))
        // A field of the wrong type is named.
        let wrong = #expect(throws: SettingsError.self) {
            try Settings1.DescribeReply([Settings1.ValueMap(["serial": .int32(1)]).dbusValue])
        }
        #expect(wrong?.code == .invalidValue)
        #expect(wrong?.message.contains("'serial'") == true)
        #expect(throws: SettingsError.invalidValue("")) {
            try Settings1.DescribeReply([Settings1.ValueMap(["registered": .boolean(true)]).dbusValue])
        }
    }

    @Test func describeSendsItsFieldsInTheDocumentedOrder() {
        let reply = Settings1.DescribeReply(
            writable: true, schema: Self.schema, signature: .int32, value: .int32(100), valueIgnored: "why",
            serial: 9, otherFields: ["zz": .boolean(true), "later": .string("field")])
        #expect(
            reply.fields.map(\.name)
                == [
                    "writable", "registered", "signature", "default", "summary", "description", "range", "choices",
                    "secret", "value", "value-ignored", "serial", "later", "zz",
                ])
    }

    // MARK: - The interface XML

    /// The arguments of each method, signal and property of `dbus/io.github.settingsbus.Settings1.xml`.
    struct InterfaceXML {
        var inputs: [String: [DBusArgument]] = [:]
        var outputs: [String: [DBusArgument]] = [:]
        var methods: [String] = []
        var signals: [String: [DBusArgument]] = [:]
        var properties: [String: DBusType] = [:]

        static func read() throws -> InterfaceXML {
            let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("dbus/io.github.settingsbus.Settings1.xml")
            var xml = InterfaceXML()
            var method: String?, signal: String?
            for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") {
                let line = line.trimmingCharacters(in: .whitespaces)
                if line.hasPrefix("<method ") {
                    method = attribute("name", line)
                    xml.methods.append(method!)
                    xml.inputs[method!] = []
                    xml.outputs[method!] = []
                } else if line.hasPrefix("<signal ") {
                    signal = attribute("name", line)
                    xml.signals[signal!] = []
                } else if line.hasPrefix("</method>") || line.hasPrefix("</signal>") {
                    method = nil
                    signal = nil
                } else if line.hasPrefix("<arg ") {
                    let type = try DBusType(parsing: attribute("type", line)!)
                    let argument = DBusArgument(attribute("name", line)!, type)
                    if let signal {
                        xml.signals[signal]!.append(argument)
                    } else if let method, attribute("direction", line) == "out" {
                        xml.outputs[method]!.append(argument)
                    } else if let method {
                        xml.inputs[method]!.append(argument)
                    }
                } else if line.hasPrefix("<property ") {
                    xml.properties[attribute("name", line)!] = try DBusType(parsing: attribute("type", line)!)
                }
            }
            return xml
        }

        static func attribute(_ name: String, _ line: String) -> String? {
            guard let start = line.range(of: " \(name)=\"") else { return nil }
            return String(line[start.upperBound...].prefix { $0 != "\"" })
        }
    }

    @Test func theInterfaceXMLStatesTheContractsArguments() throws {
        let xml = try InterfaceXML.read()
        #expect(xml.methods == Settings1.requests.map { $0.method.rawValue }, "the methods, in order")
        for request in Settings1.requests {
            let name = request.method.rawValue
            #expect(xml.inputs[name] == request.inputs, "the inputs of \(name)")
            #expect(xml.outputs[name] == request.outputs, "the outputs of \(name)")
        }
        #expect(
            xml.signals
                == Dictionary(uniqueKeysWithValues: Settings1.signals.map { ($0.member.rawValue, $0.arguments) }))
        #expect(
            xml.properties
                == Dictionary(
                    uniqueKeysWithValues: [Settings1.Property.serial, .version].map { ($0.name.rawValue, $0.type) }))
    }

    @Test func aDescriptionChangeCoversItsKeys() throws {
        let one = try #require(Settings1.DescriptionChangedSignal(keys: [Self.key("/a/b")], serial: 1, origin: "x"))
        #expect(one.path == .key(Self.key("/a/b")))
        let many = try #require(
            Settings1.DescriptionChangedSignal(keys: [Self.key("/a/c/d"), Self.key("/a/b")], serial: 2, origin: "x"))
        #expect(many.path == .directory(Self.directory("/a/")))
        #expect(many.keys == ["/a/b", "/a/c/d"])
        #expect(Settings1.DescriptionChangedSignal(keys: [SettingPath](), serial: 3, origin: "x") == nil)
    }
}
