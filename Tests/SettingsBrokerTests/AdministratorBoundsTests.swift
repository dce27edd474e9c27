// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBusTesting
import SettingsModel
import Testing
import TestMachine

/// The administrator's folder as a boundary: files too large, too many or too broken are refused by name with
/// short problems; folders and files other users can write are not read; changes beside the folder are not
/// read as changes of it.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct AdministratorBoundsTests {
    typealias AdminFolder = AdministratorTests.AdminFolder

    /// A field of `Status` that is a list of strings.
    static func statusList(_ connection: DBusConnection, _ field: String) async throws -> [String] {
        let status = try Settings1.StatusReply(try await connection.settings("Status"))
        guard case .array(_, let items)? = status.fields[field] else { return [] }
        return items.compactMap { if case .string(let text) = $0 { text } else { nil } }
    }

    /// The administrator's default of a key; nil when it has none (nor a value or a schema: `UnknownKey`).
    static func administratorDefault(_ connection: DBusConnection, _ key: String) async throws -> DBusValue? {
        do {
            return try await AdministratorTests.describe(connection, key).administratorDefault
        } catch let error as DBusError where error.name.rawValue.hasSuffix(".UnknownKey") {
            return nil
        }
    }

    static func statusSize(_ connection: DBusConnection) async throws -> Int {
        try await connection.settings("Status").reduce(0) { $0 + $1.approximateSize }
    }

    @Test func aLongLineIsQuotedShortAnOversizedFileIsRefusedByNameAndFewProblemsAreListed() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        // A lock file whose one line is half a megabyte; a defaults file of 2 MiB (comments and one default).
        let longLine = String(repeating: "x", count: 512 * 1024)
        try admin.write("/org/example/ok\n\(longLine)\n", to: "locks.d/long")
        let big = String(repeating: "# filler filler filler filler filler filler filler filler\n", count: 40_000)
        try admin.write("[org/example/big]\ntheme='dark'\n" + big, to: "defaults.d/10-big.conf")
        // Thirty broken files.
        for index in 0..<30 {
            try admin.write("not a key \(index)\n", to: "locks.d/broken-\(index)")
        }
        try admin.write("[org/example/site]\ntheme='light'\n", to: "defaults.d/20-site.conf")
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()

            let problems = try await Self.statusList(connection, "admin-problems")
            // Every problem is short, and only a few are listed, the last saying how many more there are.
            #expect(problems.allSatisfy { $0.utf8.count < 600 }, "\(problems.map { $0.utf8.count })")
            #expect(problems.count <= 21, "\(problems.count) problems listed")
            #expect(problems.last?.hasPrefix("… and ") == true, "\(problems.suffix(3))")
            #expect(try await Self.statusSize(connection) < 64 * 1024)
            // The oversized file is named and not read; the others still are.
            let bigFile = admin.url.appendingPathComponent("defaults.d/10-big.conf").path
            let log = broker.log()
            #expect(log.contains(bigFile) && log.contains("1048576"), "\(log.suffix(2000))")
            #expect(try await Self.administratorDefault(connection, "/org/example/big/theme") == nil)
            let site = try await AdministratorTests.describe(connection, "/org/example/site/theme")
            #expect(site.administratorDefault == .string("light"))
            // The long line is quoted by a short prefix in the log too.
            #expect(!log.contains(String(repeating: "x", count: 1000)))
            #expect(log.contains("xxxxxxxxxx…"), "\(log.suffix(2000))")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aWorldWritableAdministratorFolderIsNotRead() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try admin.write("[org/example/open]\ntheme='dark'\n", to: "defaults.d/10-site.conf")
        try admin.write("/org/example/open/\n", to: "locks.d/site")
        #expect(chmod(admin.url.path, 0o777) == 0)
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()

            #expect(try await Self.administratorDefault(connection, "/org/example/open/theme") == nil)
            let problems = try await Self.statusList(connection, "admin-problems")
            #expect(problems.contains { $0.hasPrefix(admin.url.path + ": ") && $0.contains("every user") }, "\(problems)")
            #expect(broker.log().contains("every user"), "\(broker.log())")
            #expect(await broker.stop() == 0)
        }
    }

    @Test func aFileOwnedByAnotherUserALinkToOneAndASubfolderOthersCanWriteAreNotRead() async throws {
        let admin = try AdminFolder()
        defer { admin.root.remove() }
        try admin.write("[org/example/owned]\ntheme='dark'\n", to: "defaults.d/10-theirs.conf")
        try admin.write("[org/example/owned]\nsize=3\n", to: "defaults.d/20-mine.conf")
        #expect(chown(admin.url.appendingPathComponent("defaults.d/10-theirs.conf").path, 65534, 65534) == 0)
        // A link to a file of another user, in a folder the check of the administrator's folder does not cover.
        let elsewhere = try TemporaryDirectory()
        defer { elsewhere.remove() }
        let theirs = elsewhere.url.appendingPathComponent("theirs.conf")
        try "[org/example/owned]\nlinked='yes'\n".write(to: theirs, atomically: false, encoding: .utf8)
        #expect(chown(theirs.path, 65534, 65534) == 0)
        #expect(symlink(theirs.path, admin.url.appendingPathComponent("defaults.d/30-link.conf").path) == 0)
        try admin.write("/org/example/owned/\n", to: "locks.d/site")
        #expect(chmod(admin.url.appendingPathComponent("locks.d").path, 0o770) == 0)
        #expect(chown(admin.url.appendingPathComponent("locks.d").path, 0, 100) == 0)
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus, arguments: ["--admin-dir", admin.url.path])
            let connection = try await bus.connect()

            #expect(try await Self.administratorDefault(connection, "/org/example/owned/theme") == nil)
            let size = try await AdministratorTests.describe(connection, "/org/example/owned/size")
            #expect(size.administratorDefault == .int32(3))
            #expect(size.writable, "the lock in a folder group 100 can write is not read")
            let problems = try await Self.statusList(connection, "admin-problems")
            #expect(problems.contains { $0.contains("10-theirs.conf: ") && $0.contains("65534") }, "\(problems)")
            #expect(problems.contains { $0.contains("30-link.conf: ") && $0.contains("65534") }, "\(problems)")
            #expect(try await Self.administratorDefault(connection, "/org/example/owned/linked") == nil)
            #expect(problems.contains { $0.contains("locks.d: ") && $0.contains("group 100") }, "\(problems)")
            #expect(await broker.stop() == 0)
        }
    }

    /// The broker follows the folder above the administrator's (for the folder itself being made or replaced):
    /// files rewritten there, beside the folder, are no change of the administrator's files.
    @Test func filesRewrittenBesideTheFolderAreNotReadAsAChange() async throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        let folder = root.url.appendingPathComponent("settingsbus")
        for name in ["defaults.d", "locks.d"] {
            try FileManager.default.createDirectory(
                at: folder.appendingPathComponent(name), withIntermediateDirectories: true)
        }
        // A layer of 3,000 defaults, so that each reading costs CPU time one can measure.
        var text = ""
        for group in 0..<30 {
            text += "[org/example/g\(group)]\n"
            for key in 0..<100 { text += "k\(key)=\(key)\n" }
        }
        try text.write(to: folder.appendingPathComponent("defaults.d/10-many.conf"), atomically: true, encoding: .utf8)
        try await withTestBus { bus in
            let broker = try await TestBroker.start(
                on: bus, arguments: ["--admin-dir", folder.path, "--log-level", "debug"])
            let connection = try await bus.connect()
            let marker = try await AdministratorTests.signals("Changed", about: "/org/example/marker", on: connection)
            // A write is committed after the commit that announced the layer: from its reply on, the broker is
            // quiet.
            _ = try await connection.settings("Set", [.string("/org/example/settled"), .variant(.int32(1))])
            let readingsBefore = broker.log().components(separatedBy: "read the administrator's folder").count
            let cpuBefore = ProcessTimes.read(broker.pid)?.ownMilliseconds ?? 0

            // When: files beside the folder are written, made and renamed every 20 ms for 1.5 s.
            let beside = root.url.appendingPathComponent("unrelated.conf")
            let clock = ContinuousClock()
            let end = clock.now + .milliseconds(1500)
            var round = 0
            while clock.now < end {
                try "round \(round)\n".write(to: beside, atomically: round % 2 == 0, encoding: .utf8)
                round += 1
                try await Task.sleep(for: .milliseconds(20))
            }
            // Then: the marker's change, made after them, is the one reading.
            // Written beside the folder and moved in: one event in the folder, so one reading however loaded the
            // machine is (a file written in place may be read at its creation and again at its last write).
            let prepared = root.url.appendingPathComponent("marker.prepared")
            try "[org/example]\nmarker=1\n".write(to: prepared, atomically: false, encoding: .utf8)
            try FileManager.default.moveItem(at: prepared, to: folder.appendingPathComponent("defaults.d/90-marker.conf"))
            do {
                _ = try await marker.next(timeLimit: .seconds(20))
            } catch {
                Issue.record("\(error); the broker's log ends: \(broker.log().suffix(3000))")
                throw error
            }
            let used = (ProcessTimes.read(broker.pid)?.ownMilliseconds ?? 0) - cpuBefore
            let readings = broker.log().components(separatedBy: "read the administrator's folder").count - readingsBefore
            #expect(readings == 1, "\(readings) readings after \(round) writes beside the folder")
            #expect(used < 600, "the broker used \(used) ms of CPU while \(round) files were written beside its folder")
            #expect(await broker.stop() == 0)
        }
    }
}
