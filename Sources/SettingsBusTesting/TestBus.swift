// SPDX-License-Identifier: Apache-2.0

public import DBus
public import Foundation
internal import Glibc

/// A private `dbus-daemon` for tests, never the user's own session bus.
///
/// ``start(environment:)`` creates a temporary directory holding the bus socket, a service directory for
/// D-Bus activation and a wrapper config that includes `dbus/test-session.conf`, starts `dbus-daemon` there
/// and waits until it prints its address. ``stop()`` ends it by its pid and removes the directory.
///
/// ```swift
/// let bus = try await TestBus.start()
/// let connection = try await bus.connect()
/// // … run peers with `bus.environment` so they talk to this bus …
/// await connection.close()
/// await bus.stop()
/// ```
///
/// A missing `dbus-daemon` is an error naming the Debian package, never a silent skip.
public final class TestBus: Sendable {
    /// The temporary directory that holds the socket, the service directory and the daemon's log.
    public let directory: URL
    /// The bus address, `unix:path=…/bus`.
    public let address: String
    /// The activation service directory: `.service` files written here are started on demand.
    public let serviceDirectory: URL
    /// The `dbus-daemon` process.
    public let daemon: ChildProcess
    private let stopped = StopFlag()

    /// The daemon binary.
    public static let daemonPath = "/usr/bin/dbus-daemon"

    /// The bus config kept in the repository's `dbus/` folder.
    public static var configFile: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("dbus/test-session.conf")
    }

    private init(directory: URL, address: String, child: ChildProcess) {
        self.directory = directory
        self.address = address
        self.serviceDirectory = directory.appendingPathComponent("services")
        self.daemon = child
    }

    /// Variables that point a child process (a peer, a broker) at this bus as its session bus.
    public var environment: [String: String] {
        ["DBUS_SESSION_BUS_ADDRESS": address, "DBUS_SYSTEM_BUS_ADDRESS": address]
    }

    /// Starts a private bus set up as the system bus is for the broker: it admits any user, applies the shipped
    /// policy file (`dbus/io.github.settingsbus.Settings1.conf`), and lets an unprivileged user reach its socket.
    public static func startLikeTheSystemBus() async throws -> TestBus {
        let policy = configFile.deletingLastPathComponent().appendingPathComponent("io.github.settingsbus.Settings1.conf")
        let bus = try await start(
            extraConfig: """
                <policy context="default"><allow user="*"/></policy>
                <include>\(policy.path)</include>
                """)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: bus.directory.path)
        return bus
    }

    /// Starts a private bus and waits until it accepts connections.
    ///
    /// - Parameters:
    ///   - environment: extra variables for the daemon, which activated services inherit.
    ///   - extraConfig: elements added to the bus config after the test config, such as an `<include>` of a
    ///     policy file under test.
    /// - Throws: ``TestProcess/Failure`` naming the Debian package when `dbus-daemon` is missing, or saying
    ///   why the daemon did not come up within 20 seconds.
    public static func start(environment: [String: String] = [:], extraConfig: String = "") async throws -> TestBus {
        guard FileManager.default.isExecutableFile(atPath: daemonPath) else {
            throw TestProcess.Failure(
                description: "\(daemonPath) is missing: bus tests need it; install it with: apt-get install -y dbus-daemon")
        }
        guard FileManager.default.fileExists(atPath: configFile.path) else {
            throw TestProcess.Failure(description: "the test bus config \(configFile.path) is missing")
        }
        var template = Array("/tmp/settingsbus-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestProcess.Failure(description: "cannot create a temporary directory: errno \(errno)")
        }
        let directory = URL(fileURLWithPath: String(cString: made))
        let services = directory.appendingPathComponent("services")
        try FileManager.default.createDirectory(at: services, withIntermediateDirectories: true)
        let socket = directory.appendingPathComponent("bus").path
        let address = "unix:path=\(socket)"
        let wrapper = directory.appendingPathComponent("bus.conf")
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <listen>\(address)</listen>
          <servicedir>\(services.path)</servicedir>
          <include>\(configFile.path)</include>
        \(extraConfig)
        </busconfig>

        """.write(to: wrapper, atomically: true, encoding: .utf8)

        let stdout = try ClosingPipe()
        let log = directory.appendingPathComponent("daemon.log")
        let logFD = open(log.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        defer {
            close(stdout.writeEnd)
            if logFD >= 0 { close(logFD) }
        }
        let child = try ChildProcess.spawn(
            daemonPath, ["--config-file=\(wrapper.path)", "--nofork", "--nopidfile", "--print-address=1"],
            environment: ProcessInfo.processInfo.environment
                .merging(["DBUS_SESSION_BUS_ADDRESS": address]) { _, new in new }
                .merging(environment) { _, new in new },
            stdout: stdout.writeEnd, stderr: logFD >= 0 ? logFD : nil)
        let bus = TestBus(directory: directory, address: address, child: child)
        let line = await LineReader.firstLine(of: stdout.readEnd, timeLimit: .seconds(20))
        guard let line, line.hasPrefix("unix:") else {
            await bus.stop()
            let logged = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw TestProcess.Failure(description: "dbus-daemon did not start within 20 s: \(logged)")
        }
        return bus
    }

    /// Opens a connection to this bus.
    public func connect() async throws(DBusError) -> DBusConnection {
        try await DBusConnection.connect(to: .address(address))
    }

    /// Writes an activation file so that the first call to `name` starts `command`.
    ///
    /// - Parameters:
    ///   - name: the bus name the service takes.
    ///   - command: the program and its arguments (`Exec=`); arguments with spaces are quoted.
    public func installService(name: String, command: [String]) throws {
        let exec = command.map { $0.contains(" ") ? "\"\($0)\"" : $0 }.joined(separator: " ")
        let file = serviceDirectory.appendingPathComponent("\(name).service")
        try "[D-BUS Service]\nName=\(name)\nExec=\(exec)\n".write(to: file, atomically: true, encoding: .utf8)
    }

    /// Ends the daemon by its pid, waits for it to exit and removes the temporary directory.
    public func stop() async {
        guard stopped.set() else { return }
        daemon.signal(SIGTERM)
        _ = await daemon.waitForExit()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Kills the daemon with SIGKILL, as a session that ends without stopping its services does, waits for it
    /// to exit and removes the temporary directory.
    public func kill() async {
        guard stopped.set() else { return }
        daemon.signal(SIGKILL)
        _ = await daemon.waitForExit()
        try? FileManager.default.removeItem(at: directory)
    }

    deinit {
        if stopped.set() {
            daemon.signal(SIGTERM)
            try? FileManager.default.removeItem(at: directory)
        }
    }
}

/// Runs `body` with a private bus that is stopped afterwards, however `body` ends.
public func withTestBus<T>(
    environment: [String: String] = [:], _ body: (TestBus) async throws -> T
) async throws -> T {
    let bus = try await TestBus.start(environment: environment)
    do {
        let result = try await body(bus)
        await bus.stop()
        return result
    } catch {
        await bus.stop()
        throw error
    }
}

/// A flag that is set once.
final class StopFlag: Sendable {
    private let value = Locked(false)

    /// Sets the flag; returns true for the caller that set it first.
    func set() -> Bool {
        value.withLock { isSet in
            defer { isSet = true }
            return !isSet
        }
    }
}

/// Reads the first line a child prints, on a thread of its own, with a time limit.
enum LineReader {
    /// Reads up to the first newline, then closes `fd`.
    static func firstLine(of fd: Int32, timeLimit: Duration) async -> String? {
        let millis = Int32(timeLimit.components.seconds * 1000)
        return await withCheckedContinuation { continuation in
            let thread = Thread {
                defer { close(fd) }
                var bytes: [UInt8] = []
                let deadline = Date().addingTimeInterval(Double(millis) / 1000)
                while true {
                    let remaining = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
                    var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                    guard remaining > 0, poll(&pfd, 1, remaining) > 0 else { break }
                    var byte: UInt8 = 0
                    guard read(fd, &byte, 1) == 1 else { break }
                    if byte == UInt8(ascii: "\n") {
                        continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
                        return
                    }
                    bytes.append(byte)
                }
                continuation.resume(returning: nil)
            }
            thread.start()
        }
    }
}
