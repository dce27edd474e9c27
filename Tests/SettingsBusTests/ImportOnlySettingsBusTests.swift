// SPDX-License-Identifier: Apache-2.0

// An app's code that imports SettingsBus and nothing else of this package: it names every type the public
// signatures of SettingsBus use, so a type that a signature needs and SettingsBus does not re-export stops
// this file from compiling. Keep it free of `import DBus`, `import SettingsModel` and `@testable`.

import SettingsBus
import Testing

/// A value with a representation of its own, as an app writes one.
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

private enum Accent: String, SettingValue, CaseIterable { case blue, green }

extension SettingKey {
    fileprivate static var windowSize: SettingKey<WindowSize> {
        .init("/org/example/app/window-size", default: WindowSize(width: 640, height: 480))
    }
    fileprivate static var accent: SettingKey<Accent> { .init("/org/example/app/accent", default: .blue) }
}

@Suite(.timeLimit(.minutes(1)))
struct ImportOnlySettingsBusTests {
    @Test func anAppThatImportsOnlySettingsBusNamesEveryTypeOfItsSignatures() async throws {
        // A store on a bus is made without connecting: the bus, and the broker's name, are named here.
        let bus: BusSettingsStore.Bus = .address("unix:path=/nonexistent/settings-bus-test")
        let busName: BusName = "org.example.OtherBroker"
        let remote = BusSettingsStore(bus: bus, busName: busName, timeout: .seconds(1))
        await remote.close()
        #expect([BusSettingsStore.Bus.session, .system, bus].count == 3)

        let store: any SettingsStore = InMemorySettingsStore()
        try await store.register(.windowSize, .accent)
        try await store.set(.windowSize, to: WindowSize(width: 800, height: 600))
        #expect(try await store.get(.windowSize) == WindowSize(width: 800, height: 600))

        // The values, types and names a snapshot, an update or a custom store is made of.
        let path = try SettingPath("/org/example/app/window-size")
        let directory = try SettingDirectory("/org/example/app/")
        let location: SettingLocation = .directory(directory)
        let entry = DBusDictEntry(key: .string("a"), value: .variant(.objectPath(ObjectPath("/org/example"))))
        let value: DBusValue = .dictionary(key: .string, value: .variant, [entry])
        let signature = Signature(DBusType.array(.string))
        #expect(signature == Signature(.array(.string)))
        let snapshot: SettingsSnapshot = try await store.readTree(directory)
        #expect(snapshot.values[path] == .structure([.int32(800), .int32(600)]))
        let cached: CachedSetting? = store.cachedValue(of: path)
        #expect(cached == nil || cached?.serial == snapshot.serial)

        var transaction = SettingsTransaction(ifSerial: snapshot.serial)
        transaction.set(try SettingPath("/org/example/app/extra"), to: value)
        try transaction.set(.accent, to: .green)
        let serial = try await store.commit(transaction)
        let updates: SettingsUpdates = store.updates(of: location)
        for await update in updates {
            let update: SettingsUpdate = update
            #expect(update.kind == .snapshot && update.serial == serial)
            break
        }
        let description: SettingDescription = try await store.describe(.accent)
        #expect(description.userValue == .string("green"))
        let schema: SettingSchema? = description.schema
        #expect(schema?.type == .string)
        let values: SettingValues<Accent> = store.values(for: .accent)
        for await accent in values {
            #expect(accent == .green)
            break
        }
        let changes: SettingChanges<Accent> = store.changes(for: .accent)
        changes.stop()
        let change: SettingChange<Accent>.Kind? = nil
        #expect(change == nil)
        do {
            try await store.set(.accent, to: .blue)
            var conflicting = SettingsTransaction(ifSerial: 0)
            try conflicting.set(.accent, to: .green)
            _ = try await store.commit(conflicting)
            Issue.record("a commit at an old serial succeeded")
        } catch {
            let error: SettingsError = error
            #expect(error.code == .conflict)
        }
    }
}
