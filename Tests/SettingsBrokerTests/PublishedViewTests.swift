// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The view of the user's values the broker publishes (`--view`, decision 0037): one file per
/// directory, read here as an app reads it, and compared with what the broker serves on the bus (`ReadTreeLayers`
/// and `Locks`) after every kind of change, each file written before the change's reply.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct PublishedViewTests {
    typealias AdminFolder = AdministratorTests.AdminFolder

    static func entries(_ value: DBusValue?) -> [String: DBusValue] {
        value.flatMap(Settings1.ValueMap.init)?.dictionary ?? [:]
    }

    /// The view's file of `directory`, read as an app reads it; nil when there is none.
    static func view(_ folder: URL, _ directory: String) throws -> View1.Directory? {
        guard let data = FileManager.default.contents(atPath: folder.appendingPathComponent(View1.fileName(of: directory)).path)
        else { return nil }
        let message = try DBusMessage(marshalled: [UInt8](data))
        #expect(message.interface?.rawValue == "io.github.settingsbus.View1" && message.signature.text == "tsa{sv}a{sv}asa{sv}as")
        guard let view = View1.Directory(message) else { throw PeerFailure("a view file of an unknown form: \(message.signature)") }
        #expect(view.directory == directory)
        return view
    }

    /// What the broker serves of the directory's own keys on the bus, secret keys left out.
    static func served(_ connection: DBusConnection, _ directory: String, secret: Set<String> = []) async throws
        -> View1.Directory
    {
        let layers = try await connection.settings("ReadTreeLayers", [.string(directory)])
        let locks = try await connection.settings("Locks", [.string(directory)])
        func own(_ values: [String: DBusValue]) -> [String: DBusValue] {
            values.filter { key, _ in
                !secret.contains(key) && key.hasPrefix(directory) && !key.dropFirst(directory.count).contains("/")
            }
        }
        guard case .uint64(let serial)? = layers.last, case .array(_, let lockList)? = locks.first else {
            throw PeerFailure("unexpected answers: \(layers), \(locks)")
        }
        var served = View1.Directory(serial: serial, directory: directory)
        served.user = own(entries(layers.first))
        served.administrator = own(entries(layers.dropFirst().first))
        served.locks = lockList.compactMap { if case .string(let lock) = $0 { lock } else { nil } }
        return served
    }

    /// Expects the view of each directory to hold what the broker serves (an empty directory: no file), at the
    /// serial of the broker's answer or later.
    static func expectViewMatches(
        _ folder: URL, _ connection: DBusConnection, _ directories: [String], secret: Set<String> = [],
        _ step: String, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        for directory in directories {
            let served = try await served(connection, directory, secret: secret)
            let view = try view(folder, directory)
            guard let view else {
                #expect(
                    served.user.isEmpty && served.administrator.isEmpty && served.locks.isEmpty,
                    "\(step): no file for \(directory), which the broker serves as \(served)", sourceLocation: sourceLocation)
                continue
            }
            #expect(view.user == served.user, "\(step): \(directory) user", sourceLocation: sourceLocation)
            #expect(view.administrator == served.administrator, "\(step): \(directory) administrator", sourceLocation: sourceLocation)
            #expect(view.locks.sorted() == served.locks.sorted(), "\(step): \(directory) locks", sourceLocation: sourceLocation)
            #expect(view.serial <= served.serial, "\(step): \(directory) serial", sourceLocation: sourceLocation)
            #expect(Set(view.secret) == secret.filter { $0.hasPrefix(directory) }, "\(step): \(directory) secret", sourceLocation: sourceLocation)
            // Every key of the directory reads from the view what the broker serves (ReadTree: the value in force).
            let tree = entries(try await connection.settings("ReadTree", [.string(directory)]).first)
            for (key, value) in tree where !secret.contains(key) && !key.dropFirst(directory.count).contains("/") {
                #expect(view.value(of: key) == value, "\(step): \(key) reads \(String(describing: view.value(of: key))), served \(value)", sourceLocation: sourceLocation)
            }
        }
    }

    @Test func theViewHoldsWhatTheBrokerServesThroughEveryKindOfChange() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try admin.write("[org/example/editor]\ntheme='dark'\n", to: "defaults.d/10-site.conf")
        try admin.write("/org/example/editor/theme\n", to: "locks.d/site")
        try await withTestBus { bus in
            var broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let folder = URL(fileURLWithPath: broker.viewFolder)
            try await broker.waitForTheView()
            let connection = try await bus.connect()
            let (editor, other) = ("/org/example/editor/", "/org/example/other/")
            try await Self.expectViewMatches(folder, connection, [editor, other], "the administrator's layer at start")

            // Each write's files are written before its reply.
            _ = try await connection.settings("Set", [.string(editor + "greeting"), .variant(.string("hi"))])
            _ = try await connection.settings("Set", [.string(editor + "count"), .variant(.int32(3))])
            _ = try await connection.settings("Set", [.string(other + "flag"), .variant(.boolean(true))])
            _ = try await connection.settings("Set", [.string(editor + "nested/deep"), .variant(.string("below"))])
            // A registered schema's default is what a key with no value reads.
            _ = try await connection.settings(
                "Register", [.string(editor + "size"), .string("i"), .variant(.int32(12)), .stringMap([])])
            try await Self.expectViewMatches(folder, connection, [editor, other, editor + "nested/"], "sets")
            #expect(try Self.view(folder, editor)?.user[editor + "nested/deep"] == nil, "a subdirectory's key")

            let apply = Settings1.ApplyRequest(
                sets: [(try SettingPath(editor + "greeting"), .string("bye"))], resets: [.key(try SettingPath(editor + "count"))])
            _ = try await connection.settings("Apply", apply.body)
            try await Self.expectViewMatches(folder, connection, [editor], "an Apply")

            _ = try await connection.settings("Reset", [.string(other + "flag")])
            try await Self.expectViewMatches(folder, connection, [other], "a reset that empties a directory")
            #expect(try Self.view(folder, other) == nil)

            // A secret key is never in the view, nor its value anywhere in the folder.
            _ = try await connection.settings(
                "Register", [.string(editor + "token"), .string("s"), .variant(.string("")), .stringMap([("secret", .boolean(true))])])
            _ = try await connection.settings("Set", [.string(editor + "token"), .variant(.string("s3cret-value"))])
            try await Self.expectViewMatches(folder, connection, [editor], secret: [editor + "token"], "a secret key")
            #expect(try Self.view(folder, editor)?.user[editor + "token"] == nil)

            // The administrator locks a key with a user value while the broker runs: its user value leaves the
            // view with the change's signal.
            let changed = try await AdministratorTests.signals("Changed", about: editor + "greeting", on: connection)
            try admin.write("[org/example/editor]\ntheme='dark'\ngreeting='from the site'\n", to: "defaults.d/10-site.conf")
            try admin.write("/org/example/editor/theme\n/org/example/editor/greeting\n", to: "locks.d/site")
            _ = try await changed.next()
            try await Self.expectViewMatches(folder, connection, [editor], secret: [editor + "token"], "an administrator's lock")
            #expect(try Self.view(folder, editor)?.user[editor + "greeting"] == nil)
            #expect(try Self.view(folder, editor)?.administrator[editor + "greeting"] == .string("from the site"))

            // The view is the user's alone.
            var status = stat()
            #expect(lstat(folder.path, &status) == 0 && status.st_mode & 0o777 == 0o700)
            for name in try FileManager.default.contentsOfDirectory(atPath: folder.path) {
                let path = folder.appendingPathComponent(name).path
                #expect(lstat(path, &status) == 0 && status.st_mode & 0o777 == 0o600, "\(name)")
                let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
                #expect(bytes.range(of: Data("s3cret-value".utf8)) == nil, "\(name) holds the secret value")
            }

            // A new broker writes the whole view again: a file of a directory that holds nothing is removed.
            await connection.close()
            let stray = folder.appendingPathComponent(View1.fileName(of: "/org/example/gone/"))
            try Data("not a view".utf8).write(to: stray)
            broker = try await broker.restart().broker
            try await broker.waitForTheView()
            #expect(!FileManager.default.fileExists(atPath: stray.path))
            let again = try await bus.connect()
            try await Self.expectViewMatches(folder, again, [editor, other, editor + "nested/"], secret: [editor + "token"], "after a restart")
            await again.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A file the broker cannot write (here a folder stands in its place) leaves the view not complete, so that
    /// apps read from the bus rather than a file that is no longer true; the write itself is served, and the log
    /// says why, once.
    @Test func aFileThatCannotBeWrittenLeavesTheViewNotComplete() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let folder = URL(fileURLWithPath: broker.viewFolder)
            try await broker.waitForTheView()
            let blocked = folder.appendingPathComponent(View1.fileName(of: "/org/example/blocked/"))
            try FileManager.default.createDirectory(at: blocked.appendingPathComponent("inside"), withIntermediateDirectories: true)
            let connection = try await bus.connect()
            _ = try await connection.settings("Set", [.string("/org/example/blocked/k"), .variant(.int32(1))])
            _ = try await connection.settings("Set", [.string("/org/example/blocked/k"), .variant(.int32(2))])
            #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("complete").path))
            #expect(try await connection.settings("Get", [.string("/org/example/blocked/k")]) == [.variant(.int32(2))])
            let log = try String(contentsOf: broker.logFile, encoding: .utf8)
            let said = log.split(separator: "\n").filter { $0.contains("the view of the settings is not complete") }
            #expect(said.count == 1, "\(log)")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A directory of more than 4,096 children is marked `Unpublished`, so that what a commit writes stays bounded
    /// whatever one directory holds; apps read it from the bus. One that shrinks below comes back whole.
    @Test func aDirectoryOfMoreThanFourThousandKeysIsLeftToTheBus() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let folder = URL(fileURLWithPath: broker.viewFolder)
            try await broker.waitForTheView()
            let connection = try await bus.connect()
            let large = "/org/example/large/"
            let keys = try (0..<4_100).map { try SettingPath(large + "k\($0)") }
            let apply = Settings1.ApplyRequest(sets: keys.map { ($0, DBusValue.int32(1)) }, resets: [])
            _ = try await connection.settings("Apply", apply.body)
            let file = folder.appendingPathComponent(View1.fileName(of: large))
            let message = try DBusMessage(marshalled: [UInt8](try Data(contentsOf: file)))
            #expect(message.member?.rawValue == "Unpublished" && message.body.count == 2, "\(message.signature)")
            // Reset below the bound: the whole directory is in the view again.
            let resets = Settings1.ApplyRequest(sets: [], resets: keys.dropFirst(100).map { .key($0) })
            _ = try await connection.settings("Apply", resets.body)
            try await Self.expectViewMatches(folder, connection, [large], "a directory back below the bound")
            #expect(try Self.view(folder, large)?.user.count == 100)
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }
}
