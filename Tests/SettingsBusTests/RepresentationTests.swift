// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import SettingsModel

/// Value representations and keys, without a bus.
struct RepresentationTests {
    struct Window: Codable, Equatable {
        enum Placement: String, Codable { case left, right }
        var title: String
        var frame: [Double]
        var placement: Placement
        var tags: [String: Int]
        var parent: String?
        var opened: Date
    }

    @Test func aCodableStructIsARecordWithItsFieldNames() throws {
        let window = Window(
            title: "Main", frame: [0, 0, 640.5, 480], placement: .right, tags: ["pinned": 1], parent: nil,
            opened: Date(timeIntervalSince1970: 12.5))
        let encoded = try DBusValueEncoder().encode(window)
        #expect(encoded.type.signatureText == "a{sv}")
        #expect(
            GVariantText.format(encoded)
                == "{'title': <'Main'>, 'frame': <[0.0, 0.0, 640.5, 480.0]>, 'placement': <'right'>, "
                + "'tags': <{'pinned': int64 1}>, 'opened': <12.5>}")
        #expect(try DBusValueDecoder().decode(Window.self, from: encoded) == window)
    }

    @Test func aMissingRequiredFieldIsATypeMismatch() throws {
        let encoded = try GVariantText.parse("{'title': <'Main'>}")
        let error = #expect(throws: SettingsError.self) {
            try SettingRepresentations.Codable<RepresentationSamples.Font>().decode(encoded)
        }
        #expect(error?.code == .typeMismatch)
    }

    @Test func integersReadAnyDBusIntegerThatFits() throws {
        #expect(try Int.settingRepresentation.decode(.int32(-5)) == -5)
        #expect(try UInt8.settingRepresentation.decode(.uint64(200)) == 200)
        #expect(throws: SettingsError.self) { try UInt8.settingRepresentation.decode(.int64(300)) }
        #expect(throws: SettingsError.self) { try Int.settingRepresentation.decode(.double(1)) }
    }

    @Test func aRawValueThatNamesNoCaseIsATypeMismatch() throws {
        let error = #expect(throws: SettingsError.self) {
            try RepresentationSamples.Mode.settingRepresentation.decode(.string("sometimes"))
        }
        #expect(error?.code == .typeMismatch)
    }

    @Test func aKeysTypeIsTheSignatureItRegisters() throws {
        #expect(try SettingKey("/a/b", default: [String: Double]()).dbusType() == .dictionary(key: .string, value: .double))
        #expect(try SettingKey("/a/b", default: RepresentationSamples.font).dbusType().signatureText == "a{sv}")
        let volume = try SettingKey("/a/volume", default: UInt32(50), summary: "Volume").range(0...100).schema()
        #expect(volume.type == .uint32 && volume.defaultValue == .uint32(50) && volume.summary == "Volume")
        #expect(volume.range == SettingRange(min: .uint32(0), max: .uint32(100)))
        // An optional key whose default is nil registers without a default; one whose type is not fixed (a
        // Codable record) cannot say its type then.
        #expect(try SettingKey<String?>("/a/b", default: nil).schema() == SettingSchema(type: .string, defaultValue: nil))
        #expect(throws: SettingsError.self) {
            try SettingKey<RepresentationSamples.Font?>("/a/b", default: nil).schema()
        }
    }

    @Test func aDebugKeyChangesInDebugBuilds() async throws {
        let key = SettingKey(debug: "/a/debug/overlay", default: true, release: false)
        let store = InMemorySettingsStore()
        #if DEBUG
        #expect(key.fixedValue == nil)
        #expect(try await store.get(key) == true)
        try await store.set(key, to: false)
        #expect(try await store.get(key) == false)
        #else
        #expect(try await store.get(key) == false)
        await #expect(throws: SettingsError.self) { try await store.set(key, to: true) }
        #endif
    }

    @Test func aTransactionKeepsTheLastWordPerKey() throws {
        let key = SettingKey("/a/x", default: 0)
        var transaction = SettingsTransaction()
        try transaction.set(key, to: 1)
        transaction.reset(key)
        #expect(transaction.sets.isEmpty && transaction.resets == [.key(key.path)])
        try transaction.set(key, to: 2)
        #expect(transaction.sets == [key.path: .int64(2)] && transaction.resets.isEmpty)
    }
}
