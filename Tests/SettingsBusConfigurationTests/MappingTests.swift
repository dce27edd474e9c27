// SPDX-License-Identifier: Apache-2.0

import Configuration
import ConfigurationTesting
import DBus
import SettingsBus
import SettingsBusConfiguration
import SettingsBusTesting
import Testing
import SettingsModel
import TestMachine

/// The values of swift-configuration's provider compatibility test, as settings below a directory.
enum CompatValues {
    static let magic: [UInt8] = Array("magic".utf8)
    static let magic2: [UInt8] = Array("magic2".utf8)

    static func bytes(_ bytes: [UInt8]) -> DBusValue { .array(.byte, bytes.map(DBusValue.byte)) }

    /// Each config key of the test (`other.inty.array`) with its value, in the types a script would write.
    static let values: [String: DBusValue] = [
        "string": .string("Hello"),
        "other.string": .string("Other Hello"),
        "int": .int32(42),
        "other.int": .int64(24),
        "double": .double(3.14),
        "other.double": .double(2.72),
        "bool": .boolean(true),
        "other.bool": .boolean(false),
        "bytes": bytes(magic),
        "other.bytes": bytes(magic2),
        "stringy.array": .array(.string, [.string("Hello"), .string("World")]),
        "other.stringy.array": .array(.string, [.string("Hello"), .string("Swift")]),
        "inty.array": .array(.int32, [.int32(42), .int32(24)]),
        "other.inty.array": .array(.int64, [.int64(16), .int64(32)]),
        "doubly.array": .array(.double, [.double(3.14), .double(2.72)]),
        "other.doubly.array": .array(.double, [.double(0.9), .double(1.8)]),
        "booly.array": .array(.boolean, [.boolean(true), .boolean(false)]),
        "other.booly.array": .array(.boolean, [.boolean(false), .boolean(true), .boolean(true)]),
        "byteChunky.array": .array(.array(.byte), [bytes(magic), bytes(magic2)]),
        "other.byteChunky.array": .array(.array(.byte), [bytes(magic), bytes(magic2), bytes(magic)]),
    ]

    /// The transaction that sets them below `directory`.
    static func transaction(in directory: SettingDirectory) throws -> SettingsTransaction {
        var transaction = SettingsTransaction()
        for (key, value) in values {
            transaction.set(try SettingPath(directory.rawValue + key.split(separator: ".").joined(separator: "/")), to: value)
        }
        return transaction
    }
}

/// The mapping of keys and the conversion of values, on an in-memory store.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct MappingTests {
    static let directory = try! SettingDirectory("/org/example/")

    func provider(_ values: [String: DBusValue] = [:], store: InMemorySettingsStore = InMemorySettingsStore())
        async throws -> SettingsBusProvider
    {
        var transaction = SettingsTransaction()
        for (key, value) in values { transaction.set(try SettingPath(key), to: value) }
        if !transaction.isEmpty { try await store.commit(transaction) }
        return try await SettingsBusProvider(store: store, directory: Self.directory, name: "test")
    }

    @Test func passesSwiftConfigurationsProviderCompatibilityTest() async throws {
        let store = InMemorySettingsStore()
        try await store.commit(try CompatValues.transaction(in: Self.directory))
        let provider = try await SettingsBusProvider(store: store, directory: Self.directory)
        try await ProviderCompatTest(provider: provider).runTest()
    }

    @Test func aKeysComponentsAreTheSegmentsBelowTheDirectory() async throws {
        let provider = try await provider(["/org/example/editor/font-size": .int32(14)])
        #expect(try provider.settingKey(for: ["editor", "font-size"]).rawValue == "/org/example/editor/font-size")
        // A dotted string is split at its dots; camelCase is kept as it is.
        #expect(try provider.settingKey(for: "editor.fontSize").rawValue == "/org/example/editor/fontSize")
        // A component may itself hold a dot (a segment may).
        #expect(try provider.settingKey(for: ["editor", "font.size"]).rawValue == "/org/example/editor/font.size")

        let config = ConfigReader(provider: provider)
        #expect(config.int(forKey: "editor.font-size") == 14)
        #expect(config.scoped(to: "editor").int(forKey: "font-size") == 14)
        #expect(config.int(forKey: "editor.fontSize") == nil)
        #expect(try provider.value(forKey: "editor.font-size", type: .int).encodedKey == "/org/example/editor/font-size")
    }

    @Test(arguments: [
        AbsoluteConfigKey(["editor", "font size"]), AbsoluteConfigKey(["editor", ""]), AbsoluteConfigKey(["a/b"]),
        AbsoluteConfigKey(["é"]), AbsoluteConfigKey([]), AbsoluteConfigKey([String(repeating: "x", count: 1100)]),
    ])
    func aKeyThatNamesNoSettingIsAnInvalidKeyError(key: AbsoluteConfigKey) async throws {
        let provider = try await provider()
        #expect(throws: SettingsError.invalidKey("")) { try provider.value(forKey: key, type: .int) }
        await #expect(throws: SettingsError.invalidKey("")) { try await provider.fetchValue(forKey: key, type: .int) }
        #expect(throws: SettingsError.invalidKey("")) { try provider.snapshot().value(forKey: key, type: .int) }
        let watched = try await provider.watchValue(forKey: key, type: .int) { updates in
            await updates.first(where: { _ in true })
        }
        guard case .failure(let error) = watched else {
            Issue.record("watchValue gave \(String(describing: watched))")
            return
        }
        #expect((error as? SettingsError)?.code == .invalidKey)
        #expect("\(error)".contains("names no setting below /org/example/"), "\(error)")

        // The reader reports it as the provider's error.
        let config = ConfigReader(provider: provider)
        #expect(throws: SettingsError.self) { try config.requiredInt(forKey: ConfigKey(key.components)) }
    }

    @Test func integersOfEveryWidthAreInts() async throws {
        let values: [String: DBusValue] = [
            "/org/example/byte": .byte(200), "/org/example/int16": .int16(-3), "/org/example/uint16": .uint16(65535),
            "/org/example/int32": .int32(-70000), "/org/example/uint32": .uint32(4_000_000_000),
            "/org/example/int64": .int64(-5_000_000_000), "/org/example/uint64": .uint64(5_000_000_000),
        ]
        let config = ConfigReader(provider: try await provider(values))
        #expect(config.int(forKey: "byte") == 200)
        #expect(config.int(forKey: "int16") == -3)
        #expect(config.int(forKey: "uint16") == 65535)
        #expect(config.int(forKey: "int32") == -70000)
        #expect(config.int(forKey: "uint32") == 4_000_000_000)
        #expect(config.int(forKey: "int64") == -5_000_000_000)
        #expect(config.int(forKey: "uint64") == 5_000_000_000)
        // An integer is also a double.
        #expect(config.double(forKey: "int32") == -70000)
    }

    @Test func otherTypesConvertAsDocumented() async throws {
        let provider = try await provider([
            "/org/example/path": .objectPath("/org/example/Window"),
            "/org/example/paths": .array(.objectPath, [.objectPath("/a"), .objectPath("/b")]),
            "/org/example/wrapped": .variant(.variant(.string("inside"))),
            "/org/example/mixed": .array(.variant, [.variant(.int32(1)), .variant(.uint64(2))]),
            "/org/example/no-doubles": .array(.double, []),
            "/org/example/some-ints": .array(.uint16, [.uint16(7)]),
        ])
        let config = ConfigReader(provider: provider)
        #expect(config.string(forKey: "path") == "/org/example/Window")
        #expect(config.stringArray(forKey: "paths") == ["/a", "/b"])
        #expect(config.string(forKey: "wrapped") == "inside")
        #expect(config.intArray(forKey: "mixed") == [1, 2])
        #expect(config.doubleArray(forKey: "no-doubles") == [])
        #expect(config.doubleArray(forKey: "some-ints") == [7])
    }

    @Test(arguments: [
        ("/org/example/name", DBusValue.string("Mono"), ConfigType.int),
        ("/org/example/size", .int32(12), .string),
        ("/org/example/size", .int32(12), .bool),
        ("/org/example/big", .uint64(.max), .int),
        ("/org/example/ratio", .double(1.5), .int),
        ("/org/example/names", .array(.string, [.string("a")]), .intArray),
        ("/org/example/names", .array(.string, []), .intArray),
        ("/org/example/point", .structure([.int32(1), .int32(2)]), .intArray),
        ("/org/example/map", .dictionary(key: .string, value: .variant, []), .string),
    ])
    func aValueOfAnotherTypeIsATypeMismatch(key: String, value: DBusValue, type: ConfigType) async throws {
        let provider = try await provider([key: value])
        let configKey = AbsoluteConfigKey(try SettingPath(key).rawValue.split(separator: "/").dropFirst(2).map(String.init))
        #expect(throws: SettingsError.typeMismatch("")) { try provider.value(forKey: configKey, type: type) }
        await #expect(throws: SettingsError.typeMismatch("")) { try await provider.fetchValue(forKey: configKey, type: type) }
        do {
            _ = try provider.value(forKey: configKey, type: type)
        } catch let error as SettingsError {
            #expect(error.message.contains(key) && error.message.contains("'\(value.type)'"), "\(error)")
            #expect(error.message.contains(type.rawValue), "\(error)")
        }
        // A reader with a default uses the default; a required value throws the provider's error.
        let config = ConfigReader(provider: provider)
        #expect(throws: SettingsError.typeMismatch("")) {
            switch type {
            case .int: _ = try config.requiredInt(forKey: ConfigKey(configKey.components))
            case .string: _ = try config.requiredString(forKey: ConfigKey(configKey.components))
            case .bool: _ = try config.requiredBool(forKey: ConfigKey(configKey.components))
            default: _ = try config.requiredIntArray(forKey: ConfigKey(configKey.components))
            }
        }
    }

    @Test func secretsAreMarkedByTheSpecifier() async throws {
        let store = InMemorySettingsStore()
        try await store.set(SettingKey<String>("/org/example/api-token", default: ""), to: "s3cr3t")
        try await store.set(SettingKey<String>("/org/example/user", default: ""), to: "ada")
        let provider = try await SettingsBusProvider(
            store: store, directory: Self.directory, secretsSpecifier: .specific(["/org/example/api-token"]))
        #expect(try provider.value(forKey: "api-token", type: .string).value?.isSecret == true)
        #expect(try provider.value(forKey: "user", type: .string).value?.isSecret == false)
        let token = try provider.value(forKey: "api-token", type: .string).value
        #expect(token.map { "\($0)" } == "[string: <REDACTED>]")
    }

    @Test func itsNameIsThatOfTheEcosystemsProviders() async throws {
        #expect(try await provider().providerName == "SettingsBusProvider[test]")
        let unnamed = try await SettingsBusProvider(store: InMemorySettingsStore(), directory: Self.directory)
        #expect(unnamed.providerName == "SettingsBusProvider")
    }

    @Test func keysOutsideTheDirectoryAreNotServed() async throws {
        let provider = try await provider(["/org/other/size": .int32(1), "/org/example/size": .int32(2)])
        #expect(try provider.value(forKey: "size", type: .int).value == 2)
        #expect(try provider.value(forKey: "other.size", type: .int).value == nil)
    }

    @Test func aWriteReachesValueWatchAndSnapshotWatch() async throws {
        let store = InMemorySettingsStore()
        let provider = try await provider(["/org/example/size": .int32(2)], store: store)
        let config = ConfigReader(provider: provider)
        try await config.watchInt(forKey: "size", default: 0) { sizes in
            var sizes = sizes.makeAsyncIterator()
            #expect(try await sizes.next() == 2)
            try await store.set(SettingKey<Int32>("/org/example/size", default: 0), to: 3)
            #expect(try await sizes.next() == 3)
            try await store.reset(SettingKey<Int32>("/org/example/size", default: 0))
            #expect(try await sizes.next() == 0)
        }
        #expect(config.int(forKey: "size") == nil)
        try await provider.watchSnapshot { snapshots in
            var snapshots = snapshots.makeAsyncIterator()
            #expect(try await snapshots.next()?.value(forKey: "size", type: .int).value == nil)
            try await store.set(SettingKey<String>("/org/example/name", default: ""), to: "Mono")
            #expect(try await snapshots.next()?.value(forKey: "name", type: .string).value == "Mono")
        }
    }
}
