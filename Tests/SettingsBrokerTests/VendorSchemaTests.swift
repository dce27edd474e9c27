// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// Schema files that apps install: read at start, followed while the broker runs, a broken one skipped and
/// reported, a removed one's schemas kept.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct VendorSchemaTests {
    /// Writes a file as a package manager does: to a temporary name, then renamed into place.
    static func install(_ text: String, as name: String, in directory: URL) throws {
        let temporary = directory.appendingPathComponent(".\(name).tmp")
        try (text + "\n").write(to: temporary, atomically: false, encoding: .utf8)
        guard rename(temporary.path, directory.appendingPathComponent(name).path) == 0 else {
            throw PeerFailure("cannot rename \(temporary.path): errno \(errno)")
        }
    }

    static func registered(_ connection: DBusConnection, _ key: String) async throws -> [String: DBusValue] {
        let reply = try await connection.settings("Describe", [.string(key)])
        guard case .dictionary(.string, .variant, let entries)? = reply.first else { return [:] }
        var fields: [String: DBusValue] = [:]
        for entry in entries {
            if case .string(let name) = entry.key, case .variant(let value) = entry.value { fields[name] = value }
        }
        return fields
    }

    @Test func schemaFilesAreReadAtStartAndFollowedWhileTheBrokerRuns() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let schemas = directory.url.appendingPathComponent("schemas")
        try FileManager.default.createDirectory(at: schemas, withIntermediateDirectories: true)
        try Self.install("[/test/vendor/]\na.type=u\na.default=4\na.summary=From a file", as: "a.schema", in: schemas)

        try await withTestBus { bus in
            // Given: a broker started with one schema file in its folder.
            let broker = try await TestBroker.start(on: bus, arguments: ["--schema-dir", schemas.path])
            let connection = try await bus.connect()
            // Then: the file's key is registered before the broker answers anything.
            var a = try await Self.registered(connection, "/test/vendor/a")
            #expect(a["registered"] == .boolean(true))
            #expect(a["summary"] == .string("From a file"))
            #expect(try await connection.settings("Get", [.string("/test/vendor/a")]) == [.variant(.uint32(4))])

            // When: while it runs, a broken file and then a good one are installed. The good one registers a key
            // that holds a value of another type, so the registration is announced by a Changed signal.
            var rule = MatchRule(sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "Changed")
            rule.arguments[0] = "/test/vendor/b"
            let signals = Collector(try await connection.signals(matching: rule))
            _ = try await connection.settings("Set", [.string("/test/vendor/b"), .variant(.int32(5))])
            _ = try await signals.next()
            try Self.install("[/test/vendor/]\nc.type=u\nc.default=oops", as: "c.schema", in: schemas)
            try Self.install("[/test/vendor/]\nb.type=s\nb.default='from b'", as: "b.schema", in: schemas)

            // Then: the good file is registered, and its signal carries the new default.
            let registeredB = try await signals.next(timeLimit: .seconds(10))
            #expect(registeredB.body.count == 5 && GVariantText.format(registeredB.body[1]).contains("'from b'"))
            // And: the broken file was skipped, named with its line in Status and in the log.
            let status = try await connection.settings("Status")
            let problems = GVariantText.format(.structure(status))
            #expect(problems.contains("c.schema: line 3:"), "\(problems)")
            #expect(broker.log().contains("a schema file was skipped"), "\(broker.log())")
            #expect(broker.log().contains("line=3"), "\(broker.log())")
            #expect(await Self.errorName(connection, "/test/vendor/c") == "io.github.settingsbus.Settings1.Error.UnknownKey")

            // When: a file is removed, and the broken one fixed (its key again holds a value of another type).
            try FileManager.default.removeItem(at: schemas.appendingPathComponent("a.schema"))
            var ruleC = MatchRule(sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "Changed")
            ruleC.arguments[0] = "/test/vendor/c"
            let signalsC = Collector(try await connection.signals(matching: ruleC))
            _ = try await connection.settings("Set", [.string("/test/vendor/c"), .variant(.string("text"))])
            _ = try await signalsC.next()
            try Self.install("[/test/vendor/]\nc.type=u\nc.default=7", as: "c.schema", in: schemas)
            _ = try await signalsC.next(timeLimit: .seconds(10))

            // Then: the fixed file is registered and its problem gone; the removed file's schema stays. (A file
            // refused before stays listed until its reading is done, a moment after its registration is
            // announced: Status is asked until then, 10 s at most.)
            #expect(try await connection.settings("Get", [.string("/test/vendor/c")]) == [.variant(.uint32(7))])
            let deadline = ContinuousClock.now + .seconds(10)
            var after = GVariantText.format(.structure(try await connection.settings("Status")))
            while after.contains("c.schema: line"), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(10))
                after = GVariantText.format(.structure(try await connection.settings("Status")))
            }
            #expect(!after.contains("c.schema: line"), "\(after)")
            a = try await Self.registered(connection, "/test/vendor/a")
            #expect(a["registered"] == .boolean(true))

            signals.stop()
            signalsC.stop()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A schema folder made after the broker started (`~/.local/share/settingsbus/schemas` on a new account,
    /// made when the first app installs its schema) is followed from when it appears.
    @Test func aSchemaFolderMadeAfterTheBrokerStartedIsFollowed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let schemas = directory.url.appendingPathComponent("share/settingsbus/schemas")
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--schema-dir", schemas.path])
            let connection = try await bus.connect()
            var rule = MatchRule(sender: TestBroker.busName, interface: "io.github.settingsbus.Settings1", member: "Changed")
            rule.arguments[0] = "/test/late/a"
            let signals = Collector(try await connection.signals(matching: rule))
            _ = try await connection.settings("Set", [.string("/test/late/a"), .variant(.string("text"))])
            _ = try await signals.next()

            // When: the folders are made, one by one, and a file installed in the last.
            try FileManager.default.createDirectory(at: schemas, withIntermediateDirectories: true)
            try Self.install("[/test/late/]\na.type=u\na.default=4", as: "a.schema", in: schemas)

            // Then: the schema is registered (its key held a value of another type: a Changed signal says so).
            _ = try await signals.next(timeLimit: .seconds(10))
            let a = try await Self.registered(connection, "/test/late/a")
            #expect(a["registered"] == .boolean(true))
            #expect(try await connection.settings("Get", [.string("/test/late/a")]) == [.variant(.uint32(4))])
            signals.stop()
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    /// A schema file larger than the broker reads is refused by name, without being read; the others are read.
    @Test func anOversizedSchemaFileIsRefusedByName() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let schemas = directory.url.appendingPathComponent("schemas")
        try FileManager.default.createDirectory(at: schemas, withIntermediateDirectories: true)
        let filler = String(repeating: "# a comment line, many times over, to make a file too large to read\n", count: 20_000)
        try Self.install("[/test/size/]\nbig.type=u\n" + filler, as: "big.schema", in: schemas)
        try Self.install("[/test/size/]\nsmall.type=u", as: "small.schema", in: schemas)
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--schema-dir", schemas.path])
            let connection = try await bus.connect()
            #expect(try await Self.registered(connection, "/test/size/small")["registered"] == .boolean(true))
            #expect(await Self.errorName(connection, "/test/size/big") == "io.github.settingsbus.Settings1.Error.UnknownKey")
            let problems = GVariantText.format(.structure(try await connection.settings("Status")))
            #expect(problems.contains("big.schema: ") && problems.contains("1048576"), "\(problems)")
            await connection.close()
            #expect(await broker.stop() == 0)
        }
    }

    static func errorName(_ connection: DBusConnection, _ key: String) async -> String? {
        do {
            _ = try await connection.settings("Describe", [.string(key)])
            return nil
        } catch let error as DBusError {
            return error.name.rawValue
        } catch {
            return "\(error)"
        }
    }
}
