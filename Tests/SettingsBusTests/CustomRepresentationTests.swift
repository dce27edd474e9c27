// SPDX-License-Identifier: Apache-2.0

// An app's representation of its own, as an app writes one: with SettingsBus and the D-Bus values of DBus,
// and nothing else of this package.

import DBus
import SettingsBus
import Testing
import TestMachine

/// A value with a representation of its own: a `(ii)` structure.
private struct WindowSize: SettingValue, Hashable {
    var width: Int32
    var height: Int32

    struct Representation: SettingRepresentation {
        var dbusType: DBusType? { .structure([.int32, .int32]) }

        func encode(_ value: WindowSize) throws(SettingsError) -> DBusValue? {
            .structure([.int32(value.width), .int32(value.height)])
        }

        func decode(_ value: DBusValue) throws(SettingsError) -> WindowSize {
            guard case .structure(let fields) = value, fields.count == 2, case .int32(let width) = fields[0],
                case .int32(let height) = fields[1]
            else { throw .typeMismatch("not a window size: \(value)") }
            return WindowSize(width: width, height: height)
        }
    }

    static var settingRepresentation: Representation { Representation() }
}

extension SettingKey {
    fileprivate static var windowSize: SettingKey<WindowSize> {
        .init("/org/example/app/window-size", default: WindowSize(width: 640, height: 480))
    }
}

@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct CustomRepresentationTests {
    @Test func aRepresentationOfTheAppsOwnIsRegisteredWithItsTypeAndRoundTrips() async throws {
        let store: any SettingsStore = InMemorySettingsStore()
        try await store.register(.windowSize)
        try await store.set(.windowSize, to: WindowSize(width: 800, height: 600))
        #expect(try await store.get(.windowSize) == WindowSize(width: 800, height: 600))
        let description = try await store.describe(.windowSize)
        #expect(description.type == .structure([.int32, .int32]))
        #expect(description.userValue == .structure([.int32(800), .int32(600)]))
    }
}
