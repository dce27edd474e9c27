// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel
internal import Glibc

/// One benchmark run: a private bus, the broker and dconf-service on it (both started by D-Bus activation,
/// as on a desktop), and the measurements, taken side by side.
///
/// Nothing touches the user's session bus or settings: the bus is a private `dbus-daemon`, and
/// `XDG_CONFIG_HOME`, `XDG_RUNTIME_DIR`, `HOME` and `DCONF_PROFILE` point into a temporary directory that
/// is removed at the end.
final class Bench {
    let plan: BenchPlan
    let root: URL
    let bus: TestBus
    /// The variables every process of the run gets: the private bus and the temporary directories.
    let environment: [String: String]
    /// A plain connection for floors, raw calls, dconf writes and bus statistics.
    let connection: DBusConnection
    /// The client library, as an app uses it.
    let settings: BusSettingsStore
    let broker: ActivatedService
    let brokerExecutable: String
    let benchExecutable: String
    /// dconf-service and the probe, when dconf is installed; `dconfMissing` says why not otherwise.
    let dconf: ActivatedService?
    let probe: DconfProbe?
    let dconfMissing: String?
    var results = BenchResults()

    static let dconfService = "/usr/libexec/dconf-service"
    static let dconfName: BusName = "ca.desrt.dconf"

    private init(
        plan: BenchPlan, root: URL, bus: TestBus, environment: [String: String], connection: DBusConnection,
        broker: ActivatedService, brokerExecutable: String, benchExecutable: String, dconf: ActivatedService?,
        probe: DconfProbe?, dconfMissing: String?
    ) {
        self.plan = plan
        self.root = root
        self.bus = bus
        self.environment = environment
        self.connection = connection
        self.settings = BusSettingsStore(bus: .address(bus.address))
        self.broker = broker
        self.brokerExecutable = brokerExecutable
        self.benchExecutable = benchExecutable
        self.dconf = dconf
        self.probe = probe
        self.dconfMissing = dconfMissing
    }

    /// Makes the temporary directories, starts the private bus and installs both services on it.
    static func prepare(plan: BenchPlan) async throws -> Bench {
        var template = Array("/tmp/settings-bench-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw BenchFailure("cannot create a temporary directory: errno \(errno)")
        }
        let root = URL(fileURLWithPath: String(cString: made))
        let home = root.appendingPathComponent("home")
        let config = root.appendingPathComponent("config")
        // $XDG_RUNTIME_DIR in memory, as a desktop session's is (a tmpfs under /run/user), when /dev/shm is one:
        // the broker publishes its view there, and dconf its flag file.
        var runtimeTemplate = Array("/dev/shm/settings-bench-runtime-XXXXXX".utf8CString)
        let runtime = mkdtemp(&runtimeTemplate).map { URL(fileURLWithPath: String(cString: $0)) }
            ?? root.appendingPathComponent("runtime")
        for directory in [home, config, runtime, root.appendingPathComponent("stores")] {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        chmod(runtime.path, 0o700)
        // This process's own store reads the broker's view as an app's does.
        setenv("XDG_RUNTIME_DIR", runtime.path, 1)
        let profile = root.appendingPathComponent("dconf-profile")
        try "user-db:user\n".write(to: profile, atomically: true, encoding: .utf8)
        let variables = [
            "HOME": home.path, "XDG_CONFIG_HOME": config.path, "XDG_RUNTIME_DIR": runtime.path,
            "DCONF_PROFILE": profile.path,
        ]
        let bus = try await TestBus.start(environment: variables)
        let environment = variables.merging(bus.environment) { _, new in new }
        let broker = try ActivatedService(name: SettingsBusNames.busName, bus: bus, directory: root)
        let benchExecutable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        let brokerExecutable = try BuiltProduct.path("settings-broker")

        var dconf: ActivatedService?
        var probe: DconfProbe?
        var missing: String?
        if FileManager.default.isExecutableFile(atPath: dconfService) {
            do {
                probe = try await DconfProbe.build(in: root)
                let service = try ActivatedService(name: dconfName, bus: bus, directory: root)
                try service.configure(command: [dconfService], log: root.appendingPathComponent("dconf-service.log"))
                dconf = service
            } catch {
                missing = "\(error)"
            }
        } else {
            missing = "\(dconfService) is not installed (apt-get install -y dconf-service dconf-cli libdconf-dev gcc)"
        }
        let connection = try await bus.connect()
        let bench = Bench(
            plan: plan, root: root, bus: bus, environment: environment, connection: connection, broker: broker,
            brokerExecutable: brokerExecutable, benchExecutable: benchExecutable, dconf: dconf, probe: probe,
            dconfMissing: missing)
        try bench.configureBrokerStore("main")
        return bench
    }

    /// Ends every service by its pid, closes the connections, stops the bus and removes the directory.
    func finish() async {
        try? await broker.stop(using: connection)
        if let dconf { try? await dconf.stop(using: connection) }
        await settings.close()
        await connection.close()
        await bus.stop()
        try? FileManager.default.removeItem(at: root)
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/dev/shm/") {
            try? FileManager.default.removeItem(atPath: runtime)
        }
    }

    // MARK: - Services

    /// Points the broker's activation at a fresh store named `name`, stopping a running broker first.
    func useFreshBrokerStore(_ name: String) async throws {
        try await broker.stop(using: connection)
        try configureBrokerStore(name)
    }

    /// Points the broker's activation at a fresh store named `name`.
    private func configureBrokerStore(_ name: String) throws {
        let directory = root.appendingPathComponent("stores/\(name)")
        try? FileManager.default.removeItem(at: directory)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try configureBroker(store: directory.appendingPathComponent("settings.db"), log: directory.appendingPathComponent("broker.log"))
    }

    /// Points the broker's activation at `store`, with `arguments` added to its command line.
    func configureBroker(store: URL, log: URL, arguments: [String] = []) throws {
        try broker.configure(
            command: [brokerExecutable, "--bus", bus.address, "--store", store.path] + arguments, log: log)
    }

    /// Stops dconf-service and removes its database, so that the next write starts from an empty one.
    func useFreshDconfDatabase() async throws {
        guard let dconf else { return }
        try await dconf.stop(using: connection)
        let database = URL(fileURLWithPath: environment["XDG_CONFIG_HOME"]!).appendingPathComponent("dconf/user")
        try? FileManager.default.removeItem(at: database)
    }

    // MARK: - Calls

    func getID() async throws {
        _ = try await connection.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "GetId")
    }

    func ping(_ name: BusName) async throws {
        _ = try await connection.call(
            destination: name, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping", timeout: .seconds(60))
    }

    /// `Get` called on the plain connection, as a script would.
    func rawGet(_ key: String) async throws {
        _ = try await connection.call(
            destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
            interface: SettingsBusNames.interface, member: "Get", arguments: [.string(key)], timeout: .seconds(60))
    }

    /// A durable dconf write: `ca.desrt.dconf.Writer.Change`, answered once dconf-service has written its file.
    func dconfChange(_ entries: [(key: String, value: String?)]) async throws {
        try await dconfChange(blob: DconfChangeset.serialize(entries).map(DBusValue.byte))
    }

    /// A dconf write of a serialized changeset.
    func dconfChange(blob: [DBusValue]) async throws {
        _ = try await connection.call(
            destination: Self.dconfName, path: "/ca/desrt/dconf/Writer/user", interface: "ca.desrt.dconf.Writer",
            member: "Change", arguments: [.array(.byte, blob)], timeout: .seconds(300))
    }

    /// Starts a process of this run (a subscriber, a writer, the probe) with the run's environment.
    func start(_ executable: String, _ arguments: [String]) throws -> RunningProcess {
        try RunningProcess.start(executable, arguments, environment: environment)
    }
}
