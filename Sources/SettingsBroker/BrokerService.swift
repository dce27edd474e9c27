// SPDX-License-Identifier: Apache-2.0

public import DBus
public import Logging
import Dispatch
import SettingsModel
import Synchronization

/// The settings broker as a service: it opens the store, exports `io.github.settingsbus.Settings1`, takes the
/// bus name and serves until it is asked to stop.
///
/// Start-up order: refuse to start if the bus name already has an owner, open the store, export the object,
/// then request the name (so the first activated call finds the object). Shutdown (a ``ShutdownRequest``,
/// which SIGTERM and SIGINT make, idle exit, or the bus going away): stop accepting writes, finish the commits in flight,
/// bring the backup up to date, release the name, close the connection. ``run()`` then returns normally,
/// except after losing the bus, when it throws ``ConnectionLost``.
///
/// A store that cannot be opened never stops the broker (which would make D-Bus activation or systemd start
/// it again and again): a damaged store is moved aside and restored from its backup or started empty, and an
/// unusable one is served read-only; the broker logs it as an error and `Status` reports it.
public final class BrokerService: Sendable {
    /// How the broker runs.
    public struct Configuration: Sendable {
        /// The bus to serve on.
        public var bus: DBusConnection.Bus
        /// The store file.
        public var storePath: String
        /// Commit durability.
        public var durability: Durability
        /// Exit after this long without a method call; nil to serve until stopped.
        public var idleExit: Duration?
        /// The least time between two backups of the store while commits go on (see `StoreBackup`).
        public var backupInterval: Duration
        /// The folders of schema files that apps install, first first (see `VendorSchemas`).
        public var schemaDirectories: [String]
        /// The folders of GSettings schema sources (`*.gschema.xml`), first first, read after the schema files;
        /// nil for `glib-2.0/schemas` beside each of ``schemaDirectories`` that is a `settingsbus/schemas` folder
        /// (see `VendorSchemas+GSettings.swift`).
        public var gsettingsSchemaDirectories: [String]?
        /// The administrator's folder (`defaults.d/`, `locks.d/`; ``AdministratorFiles``); nil for none.
        public var administratorFolder: String?
        /// Whether the schema folders and the administrator's folder are looked at once a second instead of
        /// followed with inotify (network file systems).
        public var pollingFolders = false
        /// The users given the values of secret keys.
        public var secretReaders: SecretReaders
        /// Sync across machines, if configured (docs/sync.md).
        public var sync: (any StoreSync)?
        /// How much history of commits the store keeps (`--history-limit`, `--history-age`, `--history-size`).
        public var history = HistoryLimits()
        /// Whether callers are identified and sandboxed apps confined to their own keys, with the sandboxed apps'
        /// name and the desktop portal's backend (decision 0033): for a user's broker. The machine-wide broker
        /// leaves it off: every user may read what it holds and only root may write, and its unit hides other
        /// users' processes from it (`ProtectProc=invisible`), so it could prove no caller.
        public var confinesSandboxedApps = true
        /// The folder of the view of the user's values that apps read with no bus message (``PublishedView``);
        /// nil to publish none.
        public var viewFolder: String?

        /// The folders of schema files searched when none is given: `settingsbus/schemas` under
        /// `$XDG_DATA_HOME` (`~/.local/share`) and under each folder of `$XDG_DATA_DIRS`
        /// (`/usr/local/share:/usr/share`), in that order.
        ///
        /// - Parameter machineWide: whether the broker serves the whole machine (the system bus): then only the
        ///   folders of `$XDG_DATA_DIRS`, not its own user's `$XDG_DATA_HOME`.
        public static func defaultSchemaDirectories(environment: [String: String], machineWide: Bool = false) -> [String] {
            VendorSchemas.defaultDirectories(environment: environment, machineWide: machineWide)
        }

        /// The default ``backupInterval``: 15 minutes.
        public static let defaultBackupInterval: Duration = .seconds(900)

        /// Makes a configuration.
        public init(
            bus: DBusConnection.Bus, storePath: String, durability: Durability = .full, idleExit: Duration? = nil,
            backupInterval: Duration = Configuration.defaultBackupInterval, schemaDirectories: [String] = [],
            administratorFolder: String? = nil, secretReaders: SecretReaders = SecretReaders()
        ) {
            self.administratorFolder = administratorFolder
            self.schemaDirectories = schemaDirectories
            self.bus = bus
            self.storePath = storePath
            self.durability = durability
            self.idleExit = idleExit
            self.backupInterval = backupInterval
            self.secretReaders = secretReaders
        }
    }

    /// Why the broker could not start.
    public struct StartError: Error, CustomStringConvertible {
        /// What went wrong, for people.
        public var description: String
    }

    /// Why the broker stopped serving although nobody asked it to: its bus connection was lost (the bus daemon
    /// ended, as when a session ends without stopping its services). The commits in flight were finished and
    /// the store closed first; the executable exits non-zero, so that `Restart=on-failure` and D-Bus
    /// activation bring a broker back on the next bus.
    public struct ConnectionLost: Error, CustomStringConvertible {
        /// What happened, for people.
        public var description: String
    }

    private let configuration: Configuration
    private let logger: Logger
    private let lastActivity = Atomic<Int64>(0)
    /// Asks the running broker to stop gracefully; the executable makes SIGTERM and SIGINT such requests.
    public let shutdown = ShutdownRequest()

    /// Makes the service.
    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    private enum Ending { case shutdown, disconnected, idle }

    /// The process id of a unique name, as the bus daemon tells it (`GetConnectionUnixProcessID`); nil when
    /// it cannot.
    fileprivate static func processID(of name: String, _ connection: DBusConnection) async -> UInt32? {
        let reply: [DBusValue]
        do {
            reply = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetConnectionUnixProcessID", arguments: [.string(name)], timeout: .seconds(5))
        } catch {
            return nil
        }
        guard case .uint32(let pid)? = reply.first else { return nil }
        return pid
    }

    /// Runs the broker until ``shutdown`` is requested, idle exit or disconnection.
    ///
    /// - Throws: ``StartError`` when the name is already owned, or the bus or the store cannot be opened;
    ///   ``ConnectionLost`` after a clean stop because the bus connection was lost.
    public func run() async throws {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: configuration.bus)
        } catch {
            throw StartError(description: "cannot connect to the \(configuration.bus) bus: \(error.message)")
        }
        do {
            try await serve(on: connection)
        } catch {
            await connection.close()
            throw error
        }
    }

    private func serve(on connection: DBusConnection) async throws {
        let name = SettingsBusNames.busName
        if let owner = try await connection.nameOwner(of: name) {
            throw StartError(description: "\(name) is already owned by \(owner): another settings-broker is running on this bus")
        }
        let store: DurableStore
        do {
            store = try await DurableStore.open(path: configuration.storePath, durability: configuration.durability)
        } catch {
            throw StartError(description: error.message)
        }
        store.setHistoryLimits(configuration.history)
        log(store.condition)
        for row in store.unreadable {
            logger.error(
                "a stored entry could not be read and is kept untouched",
                metadata: ["key": "\(row.path)", "reason": "\(row.reason)", "store": "\(store.path)"])
        }
        var processOf: (@Sendable (String) async -> UInt32?)?
        if configuration.history.isOn {
            processOf = { name in await Self.processID(of: name, connection) }
        }
        let writes = WritePath(store: store, connection: connection, logger: logger, processOf: processOf)
        // Before the first commit (the administrator's layer, a schema file): every commit writes its files.
        let view = Self.makeView(configuration, logger)
        if let view { writes.publishing(to: view) }
        let vendor = VendorSchemas(
            directories: configuration.schemaDirectories, gsettingsDirectories: configuration.gsettingsSchemaDirectories,
            writes: writes, pollingFolders: configuration.pollingFolders
        ) { [logger] event in
            switch event {
            case .registered(let file, let keys):
                logger.info("registered the schemas of a schema file", metadata: ["file": "\(file)", "keys": "\(keys)"])
            case .skipped(let problem):
                logger.error(
                    "a schema file was skipped; the schemas it registered before stay", metadata: Self.metadata(problem))
            case .gsettingsSchemas(let files, let keys, let relocatable):
                if files > 0 {
                    logger.info(
                        "read the GSettings schemas; the keys of relocatable schemas (no path) are not placed",
                        metadata: ["files": "\(files)", "keys": "\(keys)", "relocatable-schemas": "\(relocatable.count)"])
                }
                if !relocatable.isEmpty {
                    logger.debug(
                        "relocatable GSettings schemas, whose keys are not registered",
                        metadata: ["schemas": "\(relocatable.joined(separator: " "))"])
                }
            case .polling:
                logger.warning(
                    "cannot follow the schema folders with inotify (too many inotify instances for this user: fs.inotify.max_user_instances); looking at them once a second instead")
            }
        }
        let administrator = configuration.administratorFolder.map { folder in
            AdministratorFiles(
                folder: folder, pollingFolders: configuration.pollingFolders,
                apply: { layer in writes.putAdministrator(layer) },
                report: { [logger] event in
                    switch event {
                    case .loaded(let files, let defaults, let locks):
                        logger.info(
                            "the administrator's files are in force",
                            metadata: ["folder": "\(folder)", "files": "\(files)", "defaults": "\(defaults)", "locks": "\(locks)"])
                    case .skipped(let problem):
                        logger.error(
                            "an administrator's file was skipped; what it said when last read stays in force",
                            metadata: Self.metadata(problem))
                    case .read(let files, let problems):
                        logger.debug(
                            "read the administrator's folder",
                            metadata: ["folder": "\(folder)", "files": "\(files)", "problems": "\(problems)"])
                    case .polling:
                        logger.warning(
                            "cannot follow the administrator's folder with inotify (too many inotify instances for this user: fs.inotify.max_user_instances); looking at it once a second instead")
                    }
                })
        }
        touch()
        // Every caller is identified, and a sandboxed app confined to its own keys and the shared ones (decision
        // 0033); the sandboxed apps' name, on a connection of its own, sends each of them its changes alone.
        let shared = SharedKeys(
            administratorFile: configuration.administratorFolder.map { $0 + "/sandbox-shared" },
            userFile: StoreFiles.directory(of: store.path) + "/sandbox-shared")
        let confines = configuration.confinesSandboxedApps
        let confinement = Confinement(peers: PeerIdentities(), shared: shared)
        let moreStatus: @Sendable () -> [String: DBusValue] = { [sync = configuration.sync] in
            var fields = vendor.status().merging(administrator?.status() ?? [:]) { own, _ in own }
                .merging(sync?.status() ?? [:]) { own, _ in own }
            let problems = shared.problems
            if !problems.isEmpty { fields["sandbox-shared-problems"] = .array(.string, problems.map { .string($0) }) }
            return fields
        }
        let interface = SettingsInterface.interface(
            writes: writes, secretReaders: configuration.secretReaders, activity: { [weak self] in self?.touch() },
            moreStatus: moreStatus, confinement: confines ? confinement : nil)
        let sandboxedConfinement = Confinement(peers: confinement.peers, shared: shared, unicastsChanges: true)
        let sandboxedInterface = SettingsInterface.interface(
            writes: writes, secretReaders: configuration.secretReaders, activity: { [weak self] in self?.touch() },
            moreStatus: moreStatus, confinement: sandboxedConfinement)
        let names = NameFollowing()
        let portal: PortalSettings? =
            switch configuration.bus {
            case .session, .address: confines ? PortalSettings(store: store, logger: logger) : nil
            case .system, .peer: nil
            }
        let lost = Atomic<Bool>(false)
        let sync = configuration.sync
        let parts = BrokerParts(
            starting: [
                // Opened above (the other parts are made with it); closed once the backup has caught up.
                BrokerPart("store file", stop: { store.persistence.close() }),
                // Stopping refuses further writes and finishes the commits in flight.
                BrokerPart("writes", stop: { await store.close() }),
                BrokerPart("sync", start: { await sync?.start(writes: writes) }, stop: { await sync?.stop() }),
                BrokerPart("schema files", start: { await vendor.start() }, stop: { vendor.stop() }),
                BrokerPart("administrator files", start: { await administrator?.start() }, stop: { administrator?.stop() }),
                // Exported before the name is taken, so that the first activated call finds the object.
                BrokerPart(
                    "bus name",
                    start: {
                        if confines { try await names.follow(on: connection, peers: confinement.peers) }
                        try await connection.export([interface], at: SettingsBusNames.objectPath)
                        guard try await connection.requestName(name, flags: [.doNotQueue]) == .primaryOwner else {
                            throw StartError(
                                description: "\(name) is already owned: another settings-broker is running on this bus")
                        }
                    },
                    stop: {
                        if !lost.load(ordering: .relaxed) { _ = try? await connection.releaseName(name) }
                        names.end()
                    }),
                // After the name is taken: finding the backup's serial reads the whole backup file (a tenth of
                // the start with 100,000 keys), and callers need not wait for it.
                BrokerPart(
                    "backup", start: { [logger, configuration] in Self.startBackup(of: store, configuration, logger) },
                    stop: { await store.persistence.backup.finish() }),
                // After the name is taken too: GNOME's schema sources, which the store holds from earlier runs
                // (VendorSchemas.startGSettings). The schema files' stop ends their readings.
                BrokerPart("GSettings schemas", start: { vendor.startGSettings() }),
                // After the name is taken: the whole view is written again in the background, while commits
                // already write the files of what they change.
                BrokerPart(
                    "view",
                    start: { [logger] in
                        if let view { Self.writeWholeView(
                                view, of: store, bus: (connection.serverID ?? "", connection.serverSocket ?? ""), logger) }
                    }),
                // Last: a sandboxed app that finds this name finds the broker serving; the first reply on the main
                // name waits for none of this. On a connection of its own, which never broadcasts
                // (``SandboxedSignals``).
                BrokerPart(
                    "sandboxed apps' name",
                    start: { [logger, configuration] in
                        guard confines else { return }
                        try await names.serveSandboxedApps(
                            bus: configuration.bus, interface: sandboxedInterface, writes: writes,
                            confinement: sandboxedConfinement, logger: logger)
                    },
                    stop: { await names.stopServingSandboxedApps(releasing: !lost.load(ordering: .relaxed)) }),
                // The desktop portal's Settings backend, on a session bus (decision 0033).
                BrokerPart(
                    "desktop portal",
                    start: {
                        guard let portal else { return }
                        try await portal.serve(on: connection)
                        writes.alsoAnnounce { portal.announce($0) }
                    },
                    stop: { await portal?.stop() }),
            ],
            stopping: [
                // The writers first; then the store refuses writes and finishes the commits in flight, the
                // backup catches up and the file is closed; the name goes last, so that a broker started by
                // the next call finds the store free.
                "GSettings schemas", "schema files", "administrator files", "sync", "desktop portal", "sandboxed apps' name",
                "writes", "view",
                "backup", "store file", "bus name",
            ])
        let started = try await parts.start()
        let (serial, keys, schemas) = (store.serial, store.userValueCount, store.schemaCount)
        logger.info(
            "serving",
            metadata: [
                "name": "\(name)", "store": "\(store.path)", "serial": "\(serial)", "keys": "\(keys)",
                "schemas": "\(schemas)",
                "durability": "\(configuration.durability.rawValue)", "health": "\(store.condition.health.rawValue)",
            ])

        let ending = await waitForEnding(connection)
        logger.info("stopping", metadata: ["reason": "\(ending)"])
        lost.store(ending == .disconnected, ordering: .relaxed)
        await started.stop()
        await connection.close()
        let finalSerial = store.serial
        logger.info("stopped", metadata: ["serial": "\(finalSerial)"])
        if ending == .disconnected {
            throw ConnectionLost(
                description: "the connection to the \(configuration.bus) bus was lost; the store \(store.path) was "
                    + "closed at serial \(finalSerial)")
        }
    }

    /// The view of the user's values that commits write to (``PublishedView``), if configured and its folder
    /// can be used; a `complete` left by an earlier broker is removed, until this one has written it all.
    static func makeView(_ configuration: Configuration, _ logger: Logger) -> PublishedView? {
        guard let folder = configuration.viewFolder else { return nil }
        do {
            return try PublishedView(folder: folder) { problem in logger.error("the view of the settings is not complete: \(problem)") }
        } catch {
            logger.error("no view of the settings is published; apps read them from the bus", metadata: ["reason": "\(error)"])
            return nil
        }
    }

    /// Writes the whole view again on a queue of its own, then marks it complete.
    static func writeWholeView(
        _ view: PublishedView, of store: DurableStore, bus: (id: String, socket: String), _ logger: Logger
    ) {
        DispatchQueue(label: "settings-view").async {
            let start = ContinuousClock.now
            view.publishAll(from: store, bus: bus)
            logger.debug(
                "the view of the settings is written",
                metadata: ["folder": "\(view.folder)", "duration": "\(ContinuousClock.now - start)"])
        }
    }

    /// Starts keeping the store's backup current, unless the store cannot be written.
    private static func startBackup(of store: DurableStore, _ configuration: Configuration, _ logger: Logger) {
        guard store.condition.isWritable else { return }
        let backup = store.persistence.backup
        backup.start(interval: configuration.backupInterval, serial: store.serial) { event in
            switch event {
            case .written(let serial, let duration):
                logger.debug(
                    "backup written", metadata: ["backup": "\(backup.path)", "serial": "\(serial)", "duration": "\(duration)"])
            case .failed(let reason):
                logger.error(
                    "cannot write the backup; the previous one is kept",
                    metadata: ["backup": "\(backup.path)", "reason": "\(reason)"])
            }
        }
    }

    /// The log fields of a file that was skipped: `file`, `line` when known, `problem`.
    private static func metadata(_ problem: FileProblem) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["file": "\(problem.file)", "problem": "\(problem.message)"]
        if let line = problem.line { metadata["line"] = "\(line)" }
        return metadata
    }

    /// Logs how the store was opened: an error naming the files when it was recovered or is read-only.
    private func log(_ condition: StoreCondition) {
        var metadata: Logger.Metadata = ["store": "\(condition.storePath)", "health": "\(condition.health.rawValue)"]
        if let problem = condition.problem { metadata["problem"] = "\(problem)" }
        if let file = condition.damagedFile { metadata["damaged-file"] = "\(file)" }
        if let file = condition.damagedBackup { metadata["damaged-backup"] = "\(file)" }
        switch condition.health {
        case .ok:
            return
        case .recoveredFromBackup:
            let message =
                if let file = condition.damagedFile {
                    "the settings store \(condition.storePath) was damaged: it was moved to \(file) and the store "
                        + "was restored from \(StoreOpener.backupPath(of: condition.storePath))"
                } else {
                    "the settings store \(condition.storePath) was missing: it was restored from "
                        + "\(StoreOpener.backupPath(of: condition.storePath))"
                }
            logger.error("\(message)", metadata: metadata)
        case .recoveredEmpty:
            let message =
                if let file = condition.damagedFile {
                    "the settings store \(condition.storePath) was damaged: it was moved to \(file) and, with no "
                        + "usable backup, the store starts empty"
                } else {
                    "the backup of the settings store \(condition.storePath) was damaged: it was moved aside and "
                        + "the store starts empty"
                }
            logger.error("\(message)", metadata: metadata)
        case .readOnly:
            let message =
                "the settings store \(condition.storePath) cannot be written: serving read-only, writes fail with "
                + "StoreFailure until the cause is fixed and the broker restarted"
            logger.error("\(message)", metadata: metadata)
        }
    }

    private func touch() {
        lastActivity.store(monotonicNanoseconds(), ordering: .relaxed)
    }

    private func waitForEnding(_ connection: DBusConnection) async -> Ending {
        await withTaskGroup(of: Ending?.self) { group in
            group.addTask {
                await self.shutdown.wait()
                return Task.isCancelled ? nil : .shutdown
            }
            group.addTask {
                await connection.waitUntilClosed()
                return .disconnected
            }
            if let idle = configuration.idleExit {
                group.addTask { [self] in
                    let limit = Int64(idle.components.seconds) * 1_000_000_000 + idle.components.attoseconds / 1_000_000_000
                    while !Task.isCancelled {
                        let quiet = monotonicNanoseconds() - lastActivity.load(ordering: .relaxed)
                        if quiet >= limit { return .idle }
                        do { try await Task.sleep(for: .nanoseconds(limit - quiet)) } catch { return nil }
                    }
                    return nil
                }
            }
            var ending: Ending = .shutdown
            for await result in group {
                if let result {
                    ending = result
                    break
                }
            }
            group.cancelAll()
            return ending
        }
    }
}

/// Nanoseconds since the broker's clock origin, on a monotonic clock.
private func monotonicNanoseconds() -> Int64 {
    let components = (ContinuousClock.now - BrokerClock.origin).components
    return components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
}

private enum BrokerClock {
    static let origin = ContinuousClock().now
}

/// The broker's following of the names on the bus (for ``PeerIdentities``) and its connection for sandboxed apps.
private final class NameFollowing: Sendable {
    private struct State {
        var subscription: DBusSignalSubscription?
        var sandboxed: DBusConnection?
    }
    private let state = Mutex(State())

    /// Notes each unique name that appears on the bus and forgets each that leaves, on the connection's thread,
    /// in order with the calls: a name's first call always finds its appearance noted.
    func follow(on connection: DBusConnection, peers: PeerIdentities) async throws {
        let rule = MatchRule(sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
        let subscription = try await connection.forwardSignals(matching: rule) { message in
            guard message.body.count == 3, case .string(let name) = message.body[0],
                case .string(let old) = message.body[1], case .string(let new) = message.body[2]
            else { return }
            if new.isEmpty {
                peers.left(name)
            } else if old.isEmpty {
                peers.appeared(name)
            }
        }
        state.withLock { $0.subscription = subscription }
        // The match rule is in force: every name that appears from now on is noted.
        peers.startedFollowing()
        // The daemon's sockets are the other ends of the connections: a caller that connected before is proved
        // to hold one of them (``PeerIdentities``).
        if let pid = await BrokerService.processID(of: "org.freedesktop.DBus", connection) { peers.noteBusDaemon(pid) }
        // The census of the names on the bus now, those the broker did not see appear: before the broker takes its
        // name, so that the caller that started it is counted before it is served.
        peers.noteCensus(claims: await Self.claims(on: connection))
    }

    /// How many of the unique names on the bus each process made, as the bus daemon says
    /// (`ListNames`, then `GetConnectionUnixProcessID` of each, 64 at a time); a name that left meanwhile is
    /// not counted.
    private static func claims(on connection: DBusConnection) async -> [UInt32: Int] {
        guard
            case .array(_, let listed)? = try? await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "ListNames", arguments: []
            ).first
        else { return [:] }
        let names = listed.compactMap { value -> String? in
            guard case .string(let name) = value, name.hasPrefix(":") else { return nil }
            return name
        }
        var claims: [UInt32: Int] = [:]
        for start in stride(from: 0, to: names.count, by: 64) {
            await withTaskGroup(of: UInt32?.self) { group in
                for name in names[start..<min(start + 64, names.count)] {
                    group.addTask { await BrokerService.processID(of: name, connection) }
                }
                for await pid in group { if let pid { claims[pid, default: 0] += 1 } }
            }
        }
        return claims
    }

    func end() {
        let subscription = state.withLock { state in
            defer { state.subscription = nil }
            return state.subscription
        }
        subscription?.end()
    }

    /// Takes the sandboxed apps' name on a connection of its own. A name another process holds, or that the
    /// bus's policy does not let the broker own, is logged, and the broker serves on without it.
    func serveSandboxedApps(
        bus: DBusConnection.Bus, interface: DBusInterface, writes: WritePath, confinement: Confinement,
        logger: Logger
    ) async throws {
        let name = SettingsBusNames.sandboxedBusName
        let connection = try await DBusConnection.connect(to: bus)
        try await connection.export([interface], at: SettingsBusNames.objectPath)
        // An optional name: one the bus's policy does not let the broker own (a system-type bus) is left out.
        let reply: RequestNameReply
        do {
            reply = try await connection.requestName(name, flags: [.doNotQueue])
        } catch {
            logger.error(
                "\(name) cannot be owned on this bus: sandboxed apps cannot reach this broker by it",
                metadata: ["error": "\(error)"])
            await connection.close()
            return
        }
        guard reply == .primaryOwner else {
            logger.error("\(name) is owned by another process: sandboxed apps cannot reach this broker by it")
            await connection.close()
            return
        }
        let signals = SandboxedSignals(connection: connection, confinement: confinement, logger: logger)
        writes.alsoAnnounce { signals.send($0) }
        state.withLock { $0.sandboxed = connection }
    }

    func stopServingSandboxedApps(releasing: Bool) async {
        let connection = state.withLock { state in
            defer { state.sandboxed = nil }
            return state.sandboxed
        }
        guard let connection else { return }
        if releasing { _ = try? await connection.releaseName(SettingsBusNames.sandboxedBusName) }
        await connection.close()
    }
}
