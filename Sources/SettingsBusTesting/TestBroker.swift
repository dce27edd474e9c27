// SPDX-License-Identifier: Apache-2.0

public import DBus
public import Foundation
import SettingsModel
internal import Glibc

/// The real `settings-broker` executable, running as a child process on a ``TestBus``.
///
/// Each broker gets a temporary directory that holds its store file (unless another is given) and its log
/// (standard error, given to the broker as the journal's stream, so each line starts with its priority, such
/// as `<3>`); the directory is removed when the broker is stopped.
///
/// ```swift
/// try await withTestBus { bus in
///     let broker = try await TestBroker.start(on: bus)
///     // … call io.github.settingsbus.Settings1 with gdbus, dbus-send or a DBusConnection …
///     #expect(await broker.stop() == 0)
/// }
/// ```
///
/// ``start(on:storePath:arguments:)`` returns once the broker owns its bus name: it subscribes to
/// `NameOwnerChanged` before starting the process and waits for the signal, never for a fixed time.
///
/// - Important: Call ``stop()`` or ``kill()`` before the test ends, so that no broker outlives it.
public final class TestBroker: Sendable {
    /// The bus name the broker takes.
    public static let busName: BusName = "io.github.settingsbus.Settings1"

    /// The process.
    public let process: ChildProcess
    /// The store file.
    public let storePath: String
    /// The broker's temporary directory: its log, and its store unless another path was given.
    public let directory: URL
    /// The unique bus name of the broker's connection.
    public let uniqueName: BusName
    /// The bus the broker serves on.
    public let bus: TestBus
    private let arguments: [String]
    /// Directories removed when the broker ends: its own, plus one handed over by ``restart()``.
    private let ownedDirectories: Locked<[URL]>

    /// The process id.
    public var pid: Int32 { process.pid }

    /// The log file (the broker's standard error).
    public var logFile: URL { directory.appendingPathComponent("broker.log") }

    /// Stops the broker's process with SIGSTOP and waits until it is stopped (``ChildProcess/pause()``).
    /// Resume it with `SIGCONT`.
    public func pause() async throws {
        try await process.pause()
    }

    /// Waits (20 s at most) until the broker's view is complete (its `complete` file is there).
    public func waitForTheView() async throws {
        let complete = viewFolder + "/complete"
        let deadline = ContinuousClock.now + .seconds(20)
        while !FileManager.default.fileExists(atPath: complete) {
            guard ContinuousClock.now < deadline else {
                throw TestProcess.Failure(description: "the view in \(viewFolder) was not complete within 20 s")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Waits (30 s at most) until the broker is done with what it starts in the background once it has its name:
    /// its view is complete, and its first backup is made (`Status`'s `backup-time`). A test that takes a baseline
    /// of the process (its descriptors, its memory) takes it then.
    public func waitUntilSettled() async throws {
        try await waitForTheView()
        let connection = try await bus.connect()
        do {
            try await Self.waitForTheFirstBackup(connection)
        } catch {
            await connection.close()
            throw error
        }
        await connection.close()
    }

    private static func waitForTheFirstBackup(_ connection: DBusConnection) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let status = try Settings1.StatusReply(try await connection.settings("Status")).fields
            if status["backup-time"] != nil { return }
            guard ContinuousClock.now < deadline else {
                throw TestProcess.Failure(description: "settings-broker made no backup within 30 s: \(status)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The folder of the view the broker publishes: the one the test gave with `--view`, else
    /// ``viewFolder(of:)`` of its store.
    public var viewFolder: String {
        arguments.firstIndex(of: "--view").flatMap { arguments.indices.contains($0 + 1) ? arguments[$0 + 1] : nil }
            ?? Self.viewFolder(of: storePath)
    }

    /// The view's folder for a store, unless a test gives one: in memory (`/dev/shm`, a tmpfs as
    /// `$XDG_RUNTIME_DIR` is), named for the store, so that a broker started again on it publishes it in the same
    /// place; removed with the broker's temporary directory.
    public static func viewFolder(of store: String) -> String {
        "/dev/shm/settingsbus-test-view-" + View1.hash(store)
    }

    private init(
        process: ChildProcess, storePath: String, directory: URL, uniqueName: BusName, bus: TestBus,
        arguments: [String], ownedDirectories: [URL]
    ) {
        self.process = process
        self.storePath = storePath
        self.directory = directory
        self.uniqueName = uniqueName
        self.bus = bus
        self.arguments = arguments
        self.ownedDirectories = Locked(ownedDirectories)
    }

    /// The `settings-broker` executable next to the running test bundle.
    ///
    /// The test bundle is `.build/<config>/<Package>PackageTests.xctest`; `swift build` puts the broker at
    /// `.build/<config>/settings-broker`. The variable `SETTINGS_BROKER` overrides the location.
    ///
    /// - Throws: ``TestProcess/Failure`` when the executable is missing ("build it first: swift build").
    public static func executablePath() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["SETTINGS_BROKER"], !explicit.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: explicit) else {
                throw TestProcess.Failure(description: "SETTINGS_BROKER=\(explicit) is not an executable file")
            }
            return explicit
        }
        return try BuiltProduct.path("settings-broker")
    }

    /// The value of `JOURNAL_STREAM` that names an open file as the journal's stream: its `device:inode`, as
    /// `fstat(2)` gives them (systemd.exec(5)); nil when `fstat` fails.
    ///
    /// A broker whose standard error is that file writes journald's priority prefixes (`<3>…`);
    /// ``start(on:storePath:arguments:timeLimit:)`` sets it for the broker's log, so that tests read the
    /// priority of each line.
    public static func journalStream(of fd: Int32) -> String? {
        var status = stat()
        guard fstat(fd, &status) == 0 else { return nil }
        return "\(status.st_dev):\(status.st_ino)"
    }

    /// Starts a broker and waits until it owns `io.github.settingsbus.Settings1`.
    ///
    /// - Parameters:
    ///   - bus: the bus to serve on (`--bus <address>`).
    ///   - storePath: the store file; nil for `settings.db` in the broker's temporary directory.
    ///   - arguments: more command-line arguments, such as `["--log-level", "debug"]`.
    ///   - timeLimit: how long to wait for the name.
    /// - Throws: ``TestProcess/Failure`` when the executable is missing, or the broker exits or does not take
    ///   its name within `timeLimit` (the message holds its log).
    public static func start(
        on bus: TestBus, storePath: String? = nil, arguments: [String] = [], timeLimit: Duration = .seconds(30)
    ) async throws -> TestBroker {
        try await start(on: bus, storePath: storePath, arguments: arguments, timeLimit: timeLimit, adopting: [])
    }

    private static func start(
        on bus: TestBus, storePath: String?, arguments: [String], timeLimit: Duration, adopting: [URL]
    ) async throws -> TestBroker {
        let executable = try executablePath()
        let directory = try makeTemporaryDirectory()
        let store = storePath ?? directory.appendingPathComponent("settings.db").path
        let log = directory.appendingPathComponent("broker.log")
        do {
            let connection = try await bus.connect()
            // Given: a subscription to the name's owner changes, active before the broker exists.
            var rule = MatchRule(
                sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
            rule.arguments[0] = busName.rawValue
            let changes: DBusSignalStream
            do {
                changes = try await connection.signals(matching: rule)
            } catch {
                await connection.close()
                throw error
            }

            let logFD = open(log.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard logFD >= 0 else {
                await connection.close()
                throw TestProcess.Failure(description: "cannot create \(log.path): errno \(errno)")
            }
            let process: ChildProcess
            do {
                defer { close(logFD) }
                // Schema files and administrator's files only from where the test says: never the ones
                // installed on the machine.
                let schemas =
                    (arguments.contains("--schema-dir")
                        ? [] : ["--schema-dir", directory.appendingPathComponent("schemas").path])
                    + (arguments.contains("--admin-dir")
                        ? [] : ["--admin-dir", directory.appendingPathComponent("admin").path])
                    // The view in memory, as $XDG_RUNTIME_DIR is: never the user's own.
                    + (arguments.contains("--view") ? [] : ["--view", viewFolder(of: store)])
                // The log file stands for the journal: the broker writes priority prefixes (`<3>…`) only to
                // the stream JOURNAL_STREAM names, and tests read them.
                var environment = ProcessInfo.processInfo.environment.merging(bus.environment) { _, new in new }
                environment["JOURNAL_STREAM"] = journalStream(of: logFD)
                process = try ChildProcess.spawn(
                    executable, ["--bus", bus.address, "--store", store] + schemas + arguments,
                    environment: environment, stdout: logFD, stderr: logFD)
            } catch {
                await connection.close()
                throw error
            }

            // When: the first of three events: the name gets an owner, the broker exits, or time runs out.
            let outcome = await firstOutcome(changes: changes, process: process, timeLimit: timeLimit)
            await connection.close()
            switch outcome {
            case .owned(let owner):
                let view = URL(fileURLWithPath: viewFolder(of: store))
                return TestBroker(
                    process: process, storePath: store, directory: directory, uniqueName: owner, bus: bus,
                    arguments: arguments,
                    ownedDirectories: [directory] + adopting.filter { $0 != view } + (arguments.contains("--view") ? [] : [view]))
            case .exited(let status):
                let logged = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw TestProcess.Failure(
                    description: "settings-broker exited with status \(status) before taking its name; its log:\n\(logged)")
            case .timedOut:
                process.signal(SIGKILL)
                _ = await process.waitForExit()
                let logged = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw TestProcess.Failure(
                    description: "settings-broker did not take \(busName) within \(timeLimit); its log:\n\(logged)")
            }
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
    }

    private enum StartOutcome: Sendable {
        case owned(BusName)
        case exited(Int32)
        case timedOut
    }

    /// Waits for whichever comes first; the tasks that lose are cancelled (the exit waiter simply finishes
    /// later, when the process ends).
    private static func firstOutcome(
        changes: DBusSignalStream, process: ChildProcess, timeLimit: Duration
    ) async -> StartOutcome {
        let first = FirstOutcome<StartOutcome>()
        let watcher = Task {
            for await signal in changes {
                // NameOwnerChanged(s name, s old_owner, s new_owner): an empty new owner is a release.
                if signal.body.count == 3, case .string(let owner) = signal.body[2], !owner.isEmpty,
                    let unique = try? BusName(owner)
                {
                    first.offer(.owned(unique))
                    return
                }
            }
        }
        let timer = Task {
            do { try await Task.sleep(for: timeLimit) } catch { return }
            first.offer(.timedOut)
        }
        Task { first.offer(.exited(await process.waitForExit())) }
        let outcome = await first.value()
        watcher.cancel()
        timer.cancel()
        return outcome
    }

    /// Sends SIGTERM, waits for the broker to exit and removes its temporary directory. A broker that did not
    /// stop cleanly has its log written to standard error first, for the failure it is part of.
    ///
    /// - Returns: the exit status (0 for a clean shutdown), or 128 + the signal that ended it.
    @discardableResult
    public func stop() async -> Int32 {
        process.signal(SIGTERM)
        let status = await process.waitForExit()
        if status != 0 {
            FileHandle.standardError.write(
                Data("settings-broker (pid \(process.pid)) stopped with status \(status); its log:\n\(log())\n".utf8))
        }
        removeDirectories()
        return status
    }

    /// Sends SIGKILL, waits for the broker to die and removes its temporary directory.
    ///
    /// - Returns: the status, 137 (128 + SIGKILL) unless the broker had exited already.
    @discardableResult
    public func kill() async -> Int32 {
        process.signal(SIGKILL)
        let status = await process.waitForExit()
        removeDirectories()
        return status
    }

    /// Stops the broker with SIGTERM and starts a new one on the same bus and store, with the same arguments.
    ///
    /// The store's temporary directory passes to the new broker, which removes it when it stops.
    ///
    /// - Returns: the old broker's exit status and the new broker.
    public func restart() async throws -> (exitStatus: Int32, broker: TestBroker) {
        process.signal(SIGTERM)
        let status = await process.waitForExit()
        let handed = ownedDirectories.withLock { directories in
            defer { directories = [] }
            return directories
        }
        let next: TestBroker
        do {
            next = try await TestBroker.start(
                on: bus, storePath: storePath, arguments: arguments, timeLimit: .seconds(30),
                adopting: handed.filter { $0 != directory } + [directory])
        } catch {
            for directory in handed { try? FileManager.default.removeItem(at: directory) }
            throw error
        }
        return (status, next)
    }

    /// What the broker has written to its standard error and output so far.
    public func log() -> String {
        (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
    }

    /// Waits until the broker's log holds `text`, for work it does after taking its name that no signal
    /// announces (its first reading of GNOME's schema sources, say); the log is looked at every 10 ms.
    ///
    /// - Throws: ``TestProcess/Failure`` with the log when `timeLimit` passes first.
    public func waitForLog(containing text: String, timeLimit: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeLimit
        while !log().contains(text) {
            guard ContinuousClock.now < deadline else {
                throw TestProcess.Failure(description: "the broker's log has no '\(text)' after \(timeLimit); its log:\n\(log())")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    private func removeDirectories() {
        let directories = ownedDirectories.withLock { directories in
            defer { directories = [] }
            return directories
        }
        for directory in directories { try? FileManager.default.removeItem(at: directory) }
    }

    static func makeTemporaryDirectory() throws -> URL {
        var template = Array("/tmp/settingsbus-broker-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestProcess.Failure(description: "cannot create a temporary directory: errno \(errno)")
        }
        return URL(fileURLWithPath: String(cString: made))
    }

    deinit {
        // A broker that was never stopped is killed so that it cannot outlive the test run.
        let leftovers = ownedDirectories.withLock { $0 }
        if !leftovers.isEmpty {
            process.signal(SIGKILL)
            for directory in leftovers { try? FileManager.default.removeItem(at: directory) }
        }
    }
}

extension TestBus {
    /// Writes an activation file so that the first call to `io.github.settingsbus.Settings1` on this bus
    /// starts the real `settings-broker` on it (D-Bus activation).
    ///
    /// The activated broker is a child of the bus daemon, not of the test; its log goes to the daemon's log.
    ///
    /// - Parameters:
    ///   - storePath: the store file the activated broker uses.
    ///   - arguments: more command-line arguments.
    /// - Throws: ``TestProcess/Failure`` when the executable is missing; an error writing the file.
    public func installBrokerService(storePath: String, arguments: [String] = []) throws {
        // Schema files only from where the test says: never the ones installed on the machine.
        let schemas =
            (arguments.contains("--schema-dir") ? [] : ["--schema-dir", storePath + ".schemas"])
            + (arguments.contains("--admin-dir") ? [] : ["--admin-dir", storePath + ".admin"])
            + (arguments.contains("--view") ? [] : ["--view", "none"])
        try installService(
            name: TestBroker.busName.rawValue,
            command: [try TestBroker.executablePath(), "--bus", address, "--store", storePath] + schemas + arguments)
    }
}

/// A value delivered once, by whichever of several tasks offers one first.
final class FirstOutcome<Value: Sendable>: Sendable {
    private let state = Locked<(value: Value?, waiter: CheckedContinuation<Value, Never>?)>((nil, nil))

    func offer(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, Never>? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: value)
    }

    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Value? in
                if state.value == nil { state.waiter = continuation }
                return state.value
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
