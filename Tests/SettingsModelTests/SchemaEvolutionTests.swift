// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

/// The rules for registering a key again with another schema: which changes are compatible, and what a
/// refusal says.
struct SchemaEvolutionTests {
    static let key = try! SettingPath("/org/example/app/theme")
    static let theme = SettingSchema(
        defaultValue: .string("system"), summary: "Theme",
        choices: [.string("system"), .string("light"), .string("dark")])
    static let volume = SettingSchema(defaultValue: .int32(50), range: SettingRange(min: .int32(0), max: .int32(100)))

    static func with(_ schema: SettingSchema, _ change: (inout SettingSchema) -> Void) -> SettingSchema {
        var changed = schema
        change(&changed)
        return changed
    }

    @Test func anIdenticalRegistrationChangesNothing() throws {
        #expect(Self.theme.changes(to: Self.theme).isEmpty)
        #expect(try Self.theme.checkEvolution(to: Self.theme, for: Self.key).isEmpty)
    }

    /// Each compatible change, alone: accepted by a plain registration, and named.
    @Test(arguments: [
        ("summary", with(theme) { $0.summary = "Colour theme" }),
        ("description", with(theme) { $0.description = "How the app looks" }),
        ("default", with(theme) { $0.defaultValue = .string("dark") }),
        ("choices", with(theme) { $0.choices?.append(.string("sepia")) }),
        ("choices", with(theme) { $0.choices = nil }),
        ("secret", with(theme) { $0.isSecret = true }),
        ("range", with(volume) { $0.range = SettingRange(min: .int32(-10), max: .int32(200)) }),
        ("range", with(volume) { $0.range = nil }),
    ])
    func aCompatibleChangeIsAccepted(_ field: String, _ new: SettingSchema) throws {
        let old = new.type == .int32 ? Self.volume : Self.theme
        let changes = try old.checkEvolution(to: new, for: Self.key)
        #expect(changes.map(\.field) == [field])
        #expect(changes.allSatisfy { $0.isCompatible })
    }

    @Test func aFieldAddedToARecordKeepsItsTypeAndIsCompatible() throws {
        let record = DBusType.dictionary(key: .string, value: .variant)
        func font(_ fields: [(String, DBusValue)]) -> DBusValue {
            .dictionary(
                key: .string, value: .variant,
                fields.map { DBusDictEntry(key: .string($0.0), value: .variant($0.1)) })
        }
        let v1 = SettingSchema(type: record, defaultValue: font([("family", .string("Sans"))]))
        let v2 = SettingSchema(type: record, defaultValue: font([("family", .string("Sans")), ("size", .double(11))]))
        #expect(try v1.checkEvolution(to: v2, for: Self.key).map(\.field) == ["default"])
    }

    /// Each incompatible change: refused by a plain registration with a message that names the field, its old
    /// and its new value; accepted when replacing.
    @Test(arguments: [
        ("type", with(theme) { $0.type = .int32; $0.defaultValue = .int32(0); $0.choices = nil }, "'s' → 'i'"),
        ("choices", with(theme) { $0.choices = [.string("system"), .string("light")] }, "'system', 'light', 'dark' → 'system', 'light'"),
        ("range", with(volume) { $0.range = SettingRange(min: .int32(0), max: .int32(60)) }, "0…100 → 0…60"),
        ("range", with(volume) { $0.range = SettingRange(min: .int32(10), max: .int32(200)) }, "0…100 → 10…200"),
        ("secret", with(with(theme) { $0.isSecret = true }) { $0.isSecret = false }, "true → false"),
    ])
    func anIncompatibleChangeIsRefusedNamingTheField(_ field: String, _ new: SettingSchema, _ shown: String) throws {
        let old =
            field == "range" ? Self.volume : field == "secret" ? Self.with(Self.theme) { $0.isSecret = true } : Self.theme
        let error = #expect(throws: SettingsError.self) { try old.checkEvolution(to: new, for: Self.key) }
        #expect(error?.code == .schemaConflict)
        #expect(error?.message.contains("\(field) \(shown)") == true, "\(error?.message ?? "")")
        #expect(error?.message.contains("'replace'") == true)
        let replaced = try old.checkEvolution(to: new, for: Self.key, replacing: true)
        #expect(replaced.contains { $0.field == field && !$0.isCompatible })
    }

    @Test func choicesWhereThereWereNoneAreIncompatible() {
        let free = SettingSchema(defaultValue: .string("system"), summary: "Theme")
        #expect(free.changes(to: Self.theme).map(\.isCompatible) == [false])
        let unbounded = SettingSchema(defaultValue: .int32(50))
        #expect(unbounded.changes(to: Self.volume).map(\.isCompatible) == [false])
    }
}
