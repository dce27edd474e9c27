// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel
import Testing

struct SettingsErrorTests {
    @Test(arguments: [
        (SettingsError.Code.invalidKey, "io.github.settingsbus.Settings1.Error.InvalidKey"),
        (.unknownKey, "io.github.settingsbus.Settings1.Error.UnknownKey"),
        (.typeMismatch, "io.github.settingsbus.Settings1.Error.TypeMismatch"),
        (.outOfRange, "io.github.settingsbus.Settings1.Error.OutOfRange"),
        (.notWritable, "io.github.settingsbus.Settings1.Error.NotWritable"),
        (.schemaConflict, "io.github.settingsbus.Settings1.Error.SchemaConflict"),
        (.conflict, "io.github.settingsbus.Settings1.Error.Conflict"),
        (.invalidValue, "io.github.settingsbus.Settings1.Error.InvalidValue"),
        (.tooLarge, "io.github.settingsbus.Settings1.Error.TooLarge"),
        (.storeFailure, "io.github.settingsbus.Settings1.Error.StoreFailure"),
        (.accessDenied, "io.github.settingsbus.Settings1.Error.AccessDenied"),
        (.brokerUnavailable, "org.freedesktop.DBus.Error.ServiceUnknown"),
        (.timedOut, "org.freedesktop.DBus.Error.NoReply"),
        (.disconnected, "org.freedesktop.DBus.Error.Disconnected"),
    ])
    func mapsCodesToDBusNamesAndBack(_ code: SettingsError.Code, _ name: String) throws {
        #expect(code.dbusErrorName == name)
        #expect(SettingsError.Code(dbusErrorName: name) == code)
        _ = try ErrorName(name)
        let error = SettingsError(code, "message")
        #expect(error.dbusError.name.rawValue == name)
        #expect(error.dbusError.message == "message")
        #expect(SettingsError(error.dbusError)?.code == code)
        #expect(SettingsError(error.dbusError)?.message == "message")
    }

    @Test func everyCodeIsInTheTableOnce() {
        let names = SettingsError.Code.allCases.map(\.dbusErrorName)
        #expect(names.count == 14)
        #expect(Set(names).count == names.count)
        #expect(SettingsError.Code.outOfRange.name == "OutOfRange")
    }

    @Test func unknownNamesMapToNothing() {
        #expect(SettingsError.Code(dbusErrorName: "org.example.Error.Other") == nil)
        #expect(SettingsError(DBusError(.invalidArgs, "x")) == nil)
        #expect(SettingsError.Code(dbusErrorName: SettingsBusNames.errorPrefix + "Nope") == nil)
    }

    @Test func errorsCompareByCodeOnly() {
        #expect(SettingsError.outOfRange("a") == SettingsError.outOfRange("b"))
        #expect(SettingsError.outOfRange("a") != SettingsError.tooLarge("a"))
        #expect(SettingsError.conflict("x").line > 0)
        #expect(SettingsError.conflict("x").description
            == "io.github.settingsbus.Settings1.Error.Conflict: x")
    }

    @Test func busNamesAreTheVersionOneContract() {
        #expect(SettingsBusNames.busName.rawValue == "io.github.settingsbus.Settings1")
        #expect(SettingsBusNames.objectPath.rawValue == "/io/github/settingsbus/Settings1")
        #expect(SettingsBusNames.interface.rawValue == "io.github.settingsbus.Settings1")
        #expect(SettingsBusNames.errorPrefix == "io.github.settingsbus.Settings1.Error.")
        #expect(SettingsBusNames.maximumKeyLength == SettingPath.maximumLength)
        #expect(SettingsBusNames.maximumValueSize == 1_048_576)
        #expect(SettingsBusNames.maximumValueDepth == 60)
    }
}
