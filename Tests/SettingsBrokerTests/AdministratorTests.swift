// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The administrator's layer: defaults and locks from `--admin-dir`, enforced by the broker for every peer,
/// applied while it runs, and shown by `Describe` and `Status`.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct AdministratorTests {
    /// A folder with the administrator's two subfolders.
    struct AdminFolder {
        let root: TemporaryDirectory
        var url: URL { root.url }

        init() throws {
            root = try TemporaryDirectory()
            for name in ["defaults.d", "locks.d"] {
                try FileManager.default.createDirectory(
                    at: root.url.appendingPathComponent(name), withIntermediateDirectories: true)
            }
        }

        /// Writes a file as a configuration tool does: to a hidden name, then renamed into place.
        func write(_ text: String, to path: String) throws {
            let target = url.appendingPathComponent(path)
            let temporary = target.deletingLastPathComponent().appendingPathComponent(".\(target.lastPathComponent).tmp")
            try text.write(to: temporary, atomically: false, encoding: .utf8)
            guard rename(temporary.path, target.path) == 0 else { throw PeerFailure("cannot rename: errno \(errno)") }
        }

        func remove(_ path: String) throws {
            try FileManager.default.removeItem(at: url.appendingPathComponent(path))
        }
    }

    static func describe(_ connection: DBusConnection, _ key: String) async throws -> Settings1.DescribeReply {
        try Settings1.DescribeReply(try await connection.settings("Describe", [.string(key)]))
    }

    /// The broker's `member` signals about `key` (its first argument), collected from now on.
    static func signals(_ member: MemberName, about key: String, on connection: DBusConnection) async throws
        -> Collector<DBusMessage>
    {
        var rule = MatchRule(sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: member)
        rule.arguments[0] = key
        return Collector(try await connection.signals(matching: rule))
    }

    static func errorName(_ body: () async throws -> Void) async -> String? {
        do {
            try await body()
            return nil
        } catch let error as DBusError {
            return error.name.rawValue
        } catch {
            return "\(error)"
        }
    }

    /// A key the broker knows only from a lock (no value, no schema, no administrator's default) is described as
    /// locked, not unknown: a client that knows its keys from elsewhere (a GSettings schema) learns the lock.
    @Test func aLockedKeyWithNothingElseIsDescribedAsNotWritable() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try admin.write("/org/example/kiosk/wallpaper\n", to: "locks.d/site")
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()
            let wallpaper = try await Self.describe(connection, "/org/example/kiosk/wallpaper")
            #expect(!wallpaper.writable)
            #expect(wallpaper.locked == admin.url.appendingPathComponent("locks.d/site").path + ", line 1")
            #expect(wallpaper.schema == nil && wallpaper.value == nil)
            // A key with nothing at all is still unknown.
            #expect(
                await Self.errorName { _ = try await Self.describe(connection, "/org/example/kiosk/other") }
                    == "io.github.settingsbus.Settings1.Error.UnknownKey")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// `Locks(dir)` names the locks that hold keys under a directory: its locked keys and directories, and a
    /// locked directory above it; the list follows the administrator's files.
    @Test func locksOfADirectoryNameItsLockedKeysAndTheDirectoriesThatHoldIt() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try admin.write(
            "/org/example/kiosk/wallpaper\n/org/example/kiosk/panel/\n/org/example/other/key\n/org/\n",
            to: "locks.d/site")
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()
            func locks(_ directory: String) async throws -> [DBusValue] {
                try await connection.settings("Locks", [.string(directory)])
            }
            #expect(
                try await locks("/org/example/kiosk/")
                    == [.array(.string, ["/org/", "/org/example/kiosk/panel/", "/org/example/kiosk/wallpaper"].map(DBusValue.string))])
            #expect(try await locks("/org/example/kiosk/panel/") == [.array(.string, ["/org/", "/org/example/kiosk/panel/"].map(DBusValue.string))])
            #expect(try await locks("/net/") == [.array(.string, [])])
            // A key is not a directory: InvalidKey.
            #expect(
                await Self.errorName { _ = try await locks("/org/example/kiosk") }
                    == "io.github.settingsbus.Settings1.Error.InvalidKey")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    @Test func layersResolveInOrderAndALockRefusesEveryWriterButKeepsTheUserValue() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try admin.write(
            "[org/example/app]\ntheme='dark'\nsize=14\nwallpaper='company.png'\n", to: "defaults.d/10-site.conf")
        try admin.write("# kiosk\n/org/example/app/wallpaper\n", to: "locks.d/site")
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()
            // An app's schema: an x key, so the administrator's int32 14 is served converted.
            _ = try await connection.settings(
                "Register", [.string("/org/example/app/size"), .string("x"), .variant(.int64(11)), .dictionary(key: .string, value: .variant, [])])

            // The administrator's default is over the schema's, and a user value over the administrator's.
            #expect(try await connection.settings("Get", [.string("/org/example/app/size")]) == [.variant(.int64(14))])
            #expect(try await connection.settings("Get", [.string("/org/example/app/theme")]) == [.variant(.string("dark"))])
            _ = try await connection.settings("Set", [.string("/org/example/app/theme"), .variant(.string("light"))])
            #expect(try await connection.settings("Get", [.string("/org/example/app/theme")]) == [.variant(.string("light"))])
            var theme = try await Self.describe(connection, "/org/example/app/theme")
            #expect(theme.source == "user")
            #expect(theme.administratorDefault == .string("dark"))
            #expect(theme.writable)

            // A locked key reads the administrator's value and refuses every writing method, from every peer.
            let wallpaper = try await Self.describe(connection, "/org/example/app/wallpaper")
            #expect(!wallpaper.writable)
            #expect(wallpaper.locked == admin.url.appendingPathComponent("locks.d/site").path + ", line 2")
            #expect(wallpaper.source == "administrator")
            let notWritable = "io.github.settingsbus.Settings1.Error.NotWritable"
            let key = "/org/example/app/wallpaper"
            #expect(await Self.errorName { _ = try await connection.settings("Set", [.string(key), .variant(.string("mine.png"))]) } == notWritable)
            #expect(await Self.errorName { _ = try await connection.settings("SetFromString", [.string(key), .string("'mine.png'")]) } == notWritable)
            #expect(await Self.errorName { _ = try await connection.settings("Reset", [.string(key)]) } == notWritable)
            // An Apply that touches one locked key writes nothing.
            let serial = try await connection.brokerSerial()
            let apply = [
                DBusValue.dictionary(key: .string, value: .variant, [
                    DBusDictEntry(key: .string("/org/example/app/theme"), value: .variant(.string("blue"))),
                    DBusDictEntry(key: .string(key), value: .variant(.string("mine.png"))),
                ]),
                .array(.string, []), .dictionary(key: .string, value: .variant, []),
            ]
            #expect(await Self.errorName { _ = try await connection.settings("Apply", apply) } == notWritable)
            #expect(try await connection.brokerSerial() == serial)
            #expect(try await connection.settings("Get", [.string("/org/example/app/theme")]) == [.variant(.string("light"))])
            let gdbus = try await Peers.gdbus(bus, "Set", ["'\(key)'", "<'mine.png'>"])
            #expect(ReportedError(gdbus)?.name == notWritable, "\(gdbus.stderr)")
            let dbusSend = try await Peers.dbusSend(bus, "Set", ["string:\(key)", "variant:string:mine.png"])
            #expect(ReportedError(dbusSend)?.name == notWritable, "\(dbusSend.stderr)")
            let python = try await Peers.python(bus, "Set", signature: "sv", "['\(key)', 'mine.png']")
            #expect(ReportedError(python)?.name == notWritable, "\(python.stdout)\(python.stderr)")
            #expect(ReportedError(gdbus)?.message.contains("locks.d/site, line 2") == true)

            // ReadTreeLayers keeps them apart: the user's value served (the locked key's is not), and every
            // administrator's default its schema accepts, also one a user value is served over.
            let layers = try Settings1.LayersReply(
                try await connection.settings("ReadTreeLayers", [.string("/org/example/app/")]))
            #expect(layers.user.dictionary == ["/org/example/app/theme": .string("light")], "\(layers)")
            #expect(
                layers.administrator.dictionary == [
                    "/org/example/app/size": .int64(14), "/org/example/app/theme": .string("dark"),
                    "/org/example/app/wallpaper": .string("company.png"),
                ], "\(layers)")
            // A reset back to the administrator's default: the key is in both lists of its Changed.
            let changed = try await Self.signals("Changed", about: "/org/example/app/theme", on: connection)
            _ = try await connection.settings("Reset", [.string("/org/example/app/theme")])
            let reset = try Settings1.ChangedSignal(try await changed.next(timeLimit: .seconds(10)).body)
            #expect(reset.values.dictionary["/org/example/app/theme"] == .string("dark"))
            #expect(reset.removed == ["/org/example/app/theme"])
            _ = try await connection.settings("Set", [.string("/org/example/app/theme"), .variant(.string("light"))])

            // Status names the files in force.
            let status = GVariantText.format(.structure(try await connection.settings("Status")))
            #expect(status.contains("10-site.conf"), "\(status)")
            theme = try await Self.describe(connection, "/org/example/app/theme")
            #expect(theme.locked == nil)
            #expect(await broker.stop() == 0)
        }
    }

    @Test func locksAndDefaultsChangedWhileTheBrokerRunsAreAnnouncedAndAUserValueWinsAgainWhenALockIsLifted()
        async throws
    {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()
            let key = "/org/example/kiosk/mode"
            _ = try await connection.settings("Set", [.string(key), .variant(.string("mine"))])
            let changed = try await Self.signals("Changed", about: key, on: connection)
            let described = try await Self.signals("DescriptionChanged", about: key, on: connection)

            // When: the administrator locks the directory and gives the key a default.
            try admin.write("[org/example/kiosk]\nmode='kiosk'\n", to: "defaults.d/50-kiosk.conf")
            try admin.write("/org/example/kiosk/\n", to: "locks.d/kiosk")

            // Then: watchers hear the new value and the new description, with no restart.
            let signal = try Settings1.ChangedSignal(try await changed.next(where: { message in
                (try? Settings1.ChangedSignal(message.body))?.values.dictionary[key] == .string("kiosk")
            }).body)
            #expect(signal.origin == "administrator")
            let description = try Settings1.DescriptionChangedSignal(try await described.next(where: { message in
                (try? Settings1.DescriptionChangedSignal(message.body))?.keys.contains(key) == true
            }).body)
            #expect(description.origin == "administrator")
            var reply = try await Self.describe(connection, key)
            #expect(!reply.writable)
            #expect(reply.value == .string("mine"), "the user value is kept")
            #expect(try await connection.settings("Get", [.string(key)]) == [.variant(.string("kiosk"))])

            // When: a broken edit of the lock file, then a default for a marker key (its signal comes from a
            // reading of the folder that saw the broken file too).
            let marker = try await Self.signals("Changed", about: "/org/example/marker", on: connection)
            try admin.write("/org/example/kiosk/\nnot a key\n", to: "locks.d/kiosk")
            try admin.write("[org/example]\nmarker=1\n", to: "defaults.d/90-marker.conf")
            _ = try await marker.next()
            // Then: the file is reported with its line, and the lock it set before stays in force.
            let status = GVariantText.format(.structure(try await connection.settings("Status")))
            #expect(status.contains("locks.d/kiosk: line 2:"), "\(status)")
            #expect(!(try await Self.describe(connection, key)).writable)
            #expect(broker.log().contains("an administrator's file was skipped"), "\(broker.log())")

            // When: the lock is lifted: the user's value wins again and is announced.
            try admin.remove("locks.d/kiosk")
            _ = try await changed.next(where: { message in
                (try? Settings1.ChangedSignal(message.body))?.values.dictionary[key] == .string("mine")
            })
            reply = try await Self.describe(connection, key)
            #expect(reply.writable)
            #expect(reply.source == "user")
            _ = try await connection.settings("Set", [.string(key), .variant(.string("again"))])
            #expect(await broker.stop() == 0)
        }
    }

    /// Without inotify (`--poll-folders`, as when the user has no inotify instance left) the folder is looked
    /// at once a second, and a change still applies.
    @Test func aFolderLookedAtInsteadOfFollowedStillAppliesChanges() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try await withTestBus { bus in
            let broker = try await TestBroker.start(
                on: bus, arguments: ["--admin-dir", admin.url.path, "--poll-folders"])
            let connection = try await bus.connect()
            let key = "/org/example/polled/theme"
            let changed = try await Self.signals("Changed", about: key, on: connection)
            try admin.write("[org/example/polled]\ntheme='dark'\n", to: "defaults.d/10-site.conf")
            let signal = try Settings1.ChangedSignal(try await changed.next(timeLimit: .seconds(10)).body)
            #expect(signal.values.dictionary[key] == .string("dark"))
            #expect(signal.origin == "administrator")
            #expect(await broker.stop() == 0)
        }
    }
    /// A store served read-only (here its folder cannot be made) still follows the administrator's layer: a
    /// change is announced like any other, though nothing can be written.
    @Test func aReadOnlyStoreStillAnnouncesTheAdministratorsChanges() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        let file = admin.url.appendingPathComponent("not-a-folder").path
        try Data("a file".utf8).write(to: URL(fileURLWithPath: file))
        try await withTestBus { bus in
            let broker = try await TestBroker.start(
                on: bus, storePath: file + "/settings.db", arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()
            let key = "/org/example/readonly/theme"
            let changed = try await Self.signals("Changed", about: key, on: connection)

            try admin.write("[org/example/readonly]\ntheme='dark'\n", to: "defaults.d/10-site.conf")

            let signal = try Settings1.ChangedSignal(try await changed.next().body)
            #expect(signal.values.dictionary[key] == .string("dark"))
            #expect(signal.origin == "administrator")
            #expect(try await connection.settings("Get", [.string(key)]) == [.variant(.string("dark"))])
            let refused = await Self.errorName {
                _ = try await connection.settings("Set", [.string(key), .variant(.string("light"))])
            }
            #expect(refused == "io.github.settingsbus.Settings1.Error.StoreFailure")
            #expect(await broker.stop() == 0)
        }
    }

    /// `List` names what `ReadTree` reads: a key that has nothing but an administrator's default, and the
    /// directories that hold only such keys.
    @Test func listNamesKeysAndDirectoriesThatOnlyTheAdministratorGivesADefault() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try admin.write(
            "[org/example/site]\ntheme='dark'\n[org/example/site/fonts]\nsize=12\n", to: "defaults.d/10-site.conf")
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()
            _ = try await connection.settings("Set", [.string("/org/example/app/on"), .variant(.boolean(true))])
            _ = try await connection.settings("Set", [.string("/org/example/site/zoom"), .variant(.int32(2))])

            func list(_ directory: String) async throws -> [DBusValue] {
                guard case .array(_, let names)? = try await connection.settings("List", [.string(directory)]).first
                else { throw PeerFailure("List answered no array") }
                return names
            }
            #expect(try await list("/org/example/") == [.string("app/"), .string("site/")])
            #expect(try await list("/org/example/site/") == [.string("fonts/"), .string("theme"), .string("zoom")])
            #expect(try await list("/org/example/site/fonts/") == [.string("size")])
            #expect(await broker.stop() == 0)
        }
    }
}
