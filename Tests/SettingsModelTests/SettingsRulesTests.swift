// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

/// The rules both stores follow (`SettingsRules`), checked on `SettingsState` without a bus.
struct SettingsRulesTests {
    static let volume = try! SettingPath("/org/example/app/volume")
    static let mode = try! SettingPath("/org/example/app/mode")
    static let inner = try! SettingPath("/org/example/app/sub/inner")
    static let app = try! SettingDirectory("/org/example/app/")
    static let ranged = SettingSchema(defaultValue: .int32(50), range: SettingRange(min: .int32(0), max: .int32(100)))

    /// The code of the `SettingsError` that `body` throws, nil when it throws none.
    static func error(_ body: () throws -> Void) -> SettingsError.Code? {
        do {
            try body()
            return nil
        } catch {
            return (error as? SettingsError)?.code
        }
    }

    @Test func theEffectiveValueIsTheUserValueTheSchemaAccepts() {
        #expect(SettingsRules.effectiveValue(DBusValue.int32(7), nil) == .int32(7))
        #expect(SettingsRules.effectiveValue(nil as DBusValue?, Self.ranged) == .int32(50))
        #expect(SettingsRules.effectiveValue(nil as DBusValue?, nil) == nil)
        #expect(SettingsRules.effectiveValue(DBusValue.int32(7), Self.ranged) == .int32(7))
        // Another type, or out of range: kept, not served.
        #expect(SettingsRules.effectiveValue(DBusValue.string("7"), Self.ranged) == .int32(50))
        #expect(SettingsRules.effectiveValue(DBusValue.int32(101), Self.ranged) == .int32(50))
    }

    @Test func aWriteIsConvertedWithoutLossThenChecked() throws {
        let wide = SettingSchema(defaultValue: .int64(0))
        #expect(try SettingsRules.storedValue(.int32(14), for: Self.volume, schema: wide) == .int64(14))
        #expect(try SettingsRules.storedValue(.string("x"), for: Self.volume, schema: nil) == .string("x"))
        #expect(Self.error { _ = try SettingsRules.storedValue(.string("x"), for: Self.volume, schema: wide) } == .typeMismatch)
        #expect(Self.error { _ = try SettingsRules.storedValue(.int32(101), for: Self.volume, schema: Self.ranged) } == .outOfRange)
    }

    @Test func aRefusedCommitChangesNothing() throws {
        var state = SettingsState()
        _ = try state.commit(registrations: [(Self.volume, Self.ranged)])
        let before = state
        #expect(Self.error { _ = try state.commit(sets: [(Self.mode, .string("a")), (Self.volume, .int32(101))]) } == .outOfRange)
        #expect(state == before)
    }

    @Test func compareAndSetRefusesAKeyChangedAfterTheSerial() throws {
        var state = SettingsState()
        let first = try #require(try state.commit(sets: [(Self.volume, .int32(1))])).serial
        _ = try state.commit(sets: [(Self.volume, .int32(2))])
        #expect(Self.error { _ = try state.commit(sets: [(Self.volume, .int32(3))], ifSerial: first) } == .conflict)
        // A removal is a change too.
        let second = state.serial
        _ = try state.commit(sets: [], resets: [.key(Self.volume)])
        #expect(Self.error { _ = try state.commit(sets: [(Self.volume, .int32(3))], ifSerial: second) } == .conflict)
        #expect(try state.commit(sets: [(Self.volume, .int32(3))], ifSerial: state.serial) != nil)
    }

    @Test func compareAndSetOnADirectorySeesEveryChangeBelowIt() throws {
        var state = SettingsState()
        _ = try state.commit(sets: [(Self.inner, .int32(1)), (Self.mode, .string("a"))])
        let serial = state.serial
        _ = try state.commit(sets: [], resets: [.key(Self.inner)])
        // The key reset after the serial has no value left, and still counts.
        #expect(Self.error { _ = try state.commit(sets: [], resets: [.directory(Self.app)], ifSerial: serial) } == .conflict)
        let commit = try #require(try state.commit(sets: [], resets: [.directory(Self.app)], ifSerial: state.serial))
        #expect(commit.changed == [SettingsRules.ChangedKey(key: Self.mode, value: nil, isSecret: false)])
    }

    /// A key untouched since the store's history started counts as changed at its start: the broker's rule,
    /// which the in-memory store shares (its history starts at 0).
    @Test func aKeyUntouchedSinceTheBaselineCountsAsChangedAtIt() throws {
        var state = SettingsState(serial: 10)
        #expect(Self.error { _ = try state.commit(sets: [(Self.volume, .int32(1))], ifSerial: 5) } == .conflict)
        #expect(Self.error { _ = try state.commit(sets: [], resets: [.directory(Self.app)], ifSerial: 5) } == .conflict)
        #expect(try state.commit(sets: [(Self.volume, .int32(1))], ifSerial: 10)?.serial == 11)
    }

    @Test func registrationFollowsSchemaEvolutionAndIsACommit() throws {
        var state = SettingsState()
        _ = try state.commit(sets: [(Self.volume, .int32(14)), (Self.mode, .string("loud"))])
        // A narrower stored value is converted in the registration's commit; a refused one reads the default.
        let commit = try #require(
            try state.commit(registrations: [(Self.volume, SettingSchema(defaultValue: .int64(0))), (Self.mode, Self.ranged)]))
        #expect(commit.serial == 2)
        #expect(state.values[Self.volume] == .int64(14))
        #expect(state.values[Self.mode] == .string("loud"))
        #expect(state.changes[Self.volume] == 2)
        #expect(
            commit.changed == [
                SettingsRules.ChangedKey(key: Self.mode, value: .int32(50), isSecret: false),
                SettingsRules.ChangedKey(key: Self.volume, value: .int64(14), isSecret: false),
            ])
        // Identical: no commit. Incompatible: refused unless replacing.
        #expect(try state.commit(registrations: [(Self.mode, Self.ranged)]) == nil)
        let string = SettingSchema(defaultValue: .string("quiet"))
        #expect(Self.error { _ = try state.commit(registrations: [(Self.mode, string)]) } == .schemaConflict)
        let replaced = try #require(try state.commit(registrations: [(Self.mode, string)], replacing: true))
        #expect(replaced.changed == [SettingsRules.ChangedKey(key: Self.mode, value: .string("loud"), isSecret: false)])
    }

    @Test func aDefaultAppearingForAKeyWithoutValueIsNotReported() throws {
        var state = SettingsState()
        let commit = try #require(try state.commit(registrations: [(Self.volume, Self.ranged)]))
        #expect(commit.changed.isEmpty)
        #expect(state.effectiveValue(of: Self.volume) == .int32(50))
    }

    @Test func aSecretKeyIsReportedAsSecret() throws {
        var state = SettingsState()
        var secret = SettingSchema(defaultValue: .string(""))
        secret.isSecret = true
        _ = try state.commit(registrations: [(Self.mode, secret)])
        let commit = try #require(try state.commit(sets: [(Self.mode, .string("token"))]))
        #expect(commit.changed == [SettingsRules.ChangedKey(key: Self.mode, value: .string("token"), isSecret: true)])
    }
}
