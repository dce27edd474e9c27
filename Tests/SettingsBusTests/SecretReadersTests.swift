// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import Testing
import TestMachine

/// On a bus configured like the system bus, with the shipped policy, secret values go only to root, the
/// broker's own user and the users of `--secret-readers`; plain keys stay readable by everyone.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct SecretReadersTests {
    static let token = SettingKey("/test/secret-readers/token", default: "", isSecret: true)
    static let motd = SettingKey("/test/secret-readers/motd", default: "")
    static let directory = "/test/secret-readers/"

    /// Calls the broker as another user, on one connection, with python3-dbus: `Get` of the secret key twice
    /// (the broker knows the caller's user the second time), `Get` of the plain key, `GetMany` of both and of
    /// the plain key alone, `ReadTree` of their directory and `Describe` of the secret key. One line per call:
    /// `<label> ok <reply>` or `<label> error <name> <message>`.
    static let client = """
        import dbus, os, sys
        bus = dbus.bus.BusConnection(os.environ["DBUS_SESSION_BUS_ADDRESS"])
        settings = dbus.Interface(
            bus.get_object("io.github.settingsbus.Settings1", "/io/github/settingsbus/Settings1", introspect=False),
            "io.github.settingsbus.Settings1")
        token, motd, directory = sys.argv[1:4]
        def show(label, call):
            try:
                reply = call()
                if isinstance(reply, tuple): reply = reply[0]
                if isinstance(reply, dict): reply = sorted((str(k), str(v)) for k, v in reply.items())
                else: reply = str(reply)
                print(label, "ok", reply)
            except dbus.DBusException as error:
                print(label, "error", error.get_dbus_name(), error.get_dbus_message())
        show("get-secret", lambda: settings.Get(token))
        show("get-secret-again", lambda: settings.Get(token))
        show("get-plain", lambda: settings.Get(motd))
        show("get-many-both", lambda: settings.GetMany([motd, token]))
        show("get-many-plain", lambda: settings.GetMany([motd]))
        show("read-tree", lambda: settings.ReadTree(directory))
        show("describe-secret", lambda: settings.Describe(token))
        """

    /// A private bus that admits any user and applies the shipped policy, as the system bus would.
    static func systemLikeBus() async throws -> TestBus {
        try await TestBus.startLikeTheSystemBus()
    }

    /// Runs ``client`` as the user `uid`; returns its lines by label.
    static func calls(as uid: Int, on bus: TestBus) async throws -> [String: String] {
        let result = try await TestProcess.run(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", client,
             token.path.rawValue, motd.path.rawValue, directory],
            environment: bus.environment)
        #expect(result.status == 0, "\(result.stderr)")
        var lines: [String: String] = [:]
        for line in result.stdout.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { lines[String(parts[0])] = String(parts[1]) }
        }
        return lines
    }

    @Test func onlyRootTheBrokersUserAndConfiguredReadersGetSecretValues() async throws {
        let bus = try await Self.systemLikeBus()
        // The broker runs as root here, so its own user and root are one; `daemon` (uid 1) is configured.
        let broker = try await TestBroker.start(on: bus, arguments: ["--secret-readers", "daemon"])
        let root = BusSettingsStore(bus: .address(bus.address))
        try await root.register(Self.token)
        try await root.set(Self.token, to: "hunter2")
        try await root.set(Self.motd, to: "hello from root")
        let denied = "error io.github.settingsbus.Settings1.Error.AccessDenied"

        // When: nobody reads.
        let nobody = try await Self.calls(as: 65534, on: bus)
        // Then: Get and GetMany of the secret key are refused with AccessDenied, the first time and after.
        for label in ["get-secret", "get-secret-again", "get-many-both"] {
            #expect(nobody[label]?.hasPrefix(denied) == true, "\(label): \(nobody[label] ?? "no line")")
            #expect(nobody[label]?.contains("user 65534 may not read") == true, "\(label): \(nobody[label] ?? "")")
        }
        // The plain key reads as before.
        #expect(nobody["get-plain"] == "ok hello from root")
        #expect(nobody["get-many-plain"] == "ok [('\(Self.motd.path)', 'hello from root')]")
        // ReadTree leaves the secret key out, and says nothing of it.
        #expect(nobody["read-tree"] == "ok [('\(Self.motd.path)', 'hello from root')]")
        // Describe tells about the key, but not its value.
        let description = try #require(nobody["describe-secret"])
        #expect(description.hasPrefix("ok [('default', '')"), "\(description)")
        #expect(description.contains("('secret', '1')"), "\(description)")
        #expect(!description.contains("'value'"), "\(description)")
        #expect(!nobody.values.contains { $0.contains("hunter2") }, "\(nobody)")

        // When: a configured reader reads, it gets the secret value everywhere.
        let reader = try await Self.calls(as: 1, on: bus)
        #expect(reader["get-secret"] == "ok hunter2")
        #expect(reader["get-secret-again"] == "ok hunter2")
        let both = "ok [('\(Self.motd.path)', 'hello from root'), ('\(Self.token.path)', 'hunter2')]"
        #expect(reader["get-many-both"] == both)
        #expect(reader["read-tree"] == both)

        // And root does (through the client library: its watch of the key too).
        #expect(try await root.get(Self.token) == "hunter2")
        let rootCalls = try await Self.calls(as: 0, on: bus)
        #expect(rootCalls["get-many-both"] == reader["get-many-both"])
        let watcher = BusSettingsStore(bus: .address(bus.address))
        let values = Collector(watcher.values(for: Self.token))
        #expect(try await values.next() == "hunter2")

        // The broker goes on serving.
        #expect(try await root.get(Self.motd) == "hello from root")
        values.stop()
        await watcher.close()
        await root.close()
        #expect(await broker.stop() == 0)
        await bus.stop()
    }

    @Test func anUnknownUserNameInSecretReadersKeepsTheBrokerFromStarting() async throws {
        try await withTestBus { bus in
            let result = try await TestProcess.run(
                try TestBroker.executablePath(),
                ["--bus", bus.address, "--store", NSTemporaryDirectory() + "unused-\(UUID()).db",
                 "--secret-readers", "daemon,no-such-user-here"])
            #expect(result.status == 1)
            #expect(
                result.stderr.contains("--secret-readers: there is no user named 'no-such-user-here'"),
                "\(result.stderr)")
            // It never took the name.
            let connection = try await bus.connect()
            let owned = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "NameHasOwner", arguments: [.string(TestBroker.busName.rawValue)])
            #expect(owned == [.boolean(false)])
            await connection.close()
        }
    }
}
