// SPDX-License-Identifier: Apache-2.0

import CSandbox
import DBus
import Glibc
import Logging
import SettingsBroker
import SettingsModel
import SyncProtocol

/// `settings-broker`: owns the settings store of a user session and serves it on D-Bus.
@main
struct SettingsBrokerCommand {
    static let commandLine = CommandLineOptions(
        command: "settings-broker",
        abstract: "Serve the SettingsBus settings store as io.github.settingsbus.Settings1 on D-Bus.",
        discussion: """
            Started per user session by D-Bus activation or systemd --user. It stores settings in SQLite \
            (WAL) under $XDG_CONFIG_HOME/settingsbus/ and announces every change with a Changed signal. \
            SIGTERM finishes the commits in flight, releases the bus name and exits 0. A damaged store is \
            moved aside and restored from its backup; a store that cannot be written is served read-only; \
            the Status method reports either. Logs go to standard error, one line per event, with journald's \
            priority prefixes (<3>) when standard error is the journal (JOURNAL_STREAM). Exit status: 0 after \
            SIGTERM or --idle-exit, 1 when another broker has the bus name or the store, 2 for a usage error, \
            3 after the bus connection was lost.
            """,
        options: [
            CommandOption(
                name: "bus", kind: .value(name: "bus"),
                help: "The bus to serve on: session, system, or a D-Bus address such as unix:path=/run/user/1000/bus.",
                defaultText: "session"),
            CommandOption(
                name: "store", kind: .value(name: "path"),
                help: """
                    The store file (default: $XDG_CONFIG_HOME/settingsbus/settings.db; with --bus system, \
                    settings.db in $STATE_DIRECTORY, which the system unit sets, else /var/lib/settingsbus/settings.db).
                    """),
            CommandOption(
                name: "idle-exit", kind: .value(name: "seconds"),
                help: "Exit after this many seconds without a method call (D-Bus activation starts it again)."),
            CommandOption(
                name: "durability", kind: .value(name: "durability"),
                help: "full: every acknowledged write survives a machine crash; relaxed: it survives a broker crash.",
                defaultText: Durability.full.rawValue),
            CommandOption(
                name: "backup-interval", kind: .value(name: "seconds"),
                help: """
                    The least number of seconds between two backups of the store (<store>.backup) while writes go \
                    on; a backup is also written at start-up and at shutdown when the store changed.
                    """,
                defaultText: "900"),
            CommandOption(
                name: "schema-dir", kind: .repeated(name: "dir"),
                help: """
                    A folder of schema files (*.schema) that apps install; repeat for more, the first first. \
                    Default: settingsbus/schemas under $XDG_DATA_HOME (~/.local/share) and under each folder of \
                    $XDG_DATA_DIRS (/usr/local/share:/usr/share). A folder made later is followed from when it \
                    appears; files over 1 MiB are refused.
                    """),
            CommandOption(
                name: "admin-dir", kind: .value(name: "dir"),
                help: """
                    The administrator's folder: defaults.d/*.conf (keyfiles of defaults for every user) and \
                    locks.d/* (keys and directories no one may change), followed while the broker runs. Files over \
                    1 MiB, and folders and files that users other than root and the broker's own can write, are \
                    refused.
                    """,
                defaultText: "/etc/settingsbus"),
            CommandOption(
                name: "view", kind: .value(name: "dir"),
                help: """
                    The folder of the view of the user's values that apps read with no bus message (made mode \
                    0700; one file per directory, no secret value); none to publish no view. The system broker \
                    publishes none.
                    """,
                defaultText: "$XDG_RUNTIME_DIR/settingsbus/view"),
            CommandOption(
                name: "poll-folders", kind: .flag,
                help: """
                    Look at the schema folders and the administrator's folder once a second instead of following \
                    them with inotify: for folders on a network file system. Without inotify (too many instances \
                    for the user) the broker does this by itself.
                    """),
            CommandOption(
                name: "secret-readers", kind: .value(name: "users"),
                help: """
                    Users, besides root and the broker's own user, given the values of secret keys: user names or \
                    uids separated by commas, such as gdm,1001 (names are looked up at start). Other callers get \
                    AccessDenied from Get and GetMany of a secret key, and ReadTree leaves secret keys out.
                    """),
            CommandOption(
                name: "history-limit", kind: .value(name: "commits"),
                help: """
                    The most commits that changed values kept in the store's history (settingsctl log, undo); 0 \
                    keeps no history.
                    """,
                defaultText: String(HistoryLimits.defaultCommits)),
            CommandOption(
                name: "history-age", kind: .value(name: "age"),
                help: """
                    How long the history keeps a commit: a number of seconds, or of minutes, hours or days with m, \
                    h or d (30d); 0 for no age limit.
                    """,
                defaultText: "30d"),
            CommandOption(
                name: "history-size", kind: .value(name: "size"),
                help: """
                    The most bytes the history's commits take in the store: a number of bytes, or of KiB, MiB or \
                    GiB with K, M or G (4M); the oldest commits go first, and a commit whose values take more than \
                    a quarter of it is kept without them. 0 for no size limit.
                    """,
                defaultText: "4M"),
            CommandOption(
                name: "log-level", kind: .value(name: "level"),
                help: "trace, debug, info, notice, warning, error or critical.", defaultText: "info"),
            CommandOption(
                name: "sync-url", kind: .value(name: "url"),
                help: """
                    Sync the --sync-dir directories with this PostgreSQL database, shared by the user's machines: \
                    postgres://USER@HOST[:PORT]/DATABASE[?sslmode=require|verify-ca|verify-full][&sslrootcert=CA.pem]\
                    [&host=/socket/folder]. No password in it: see --sync-password-file.
                    """),
            CommandOption(
                name: "sync-password-file", kind: .value(name: "file"),
                help: """
                    A file whose first line is the database's password (default: the matching line of PGPASSFILE \
                    or ~/.pgpass).
                    """),
            CommandOption(
                name: "sync-dir", kind: .repeated(name: "dir"),
                help: """
                    A directory whose user values sync, such as /org/example/editor/; repeat for more. Nothing \
                    syncs without one.
                    """),
            CommandOption(
                name: "sync-poll", kind: .value(name: "interval"),
                help: """
                    Poll instead of listening: hold no connection to the database between syncs, and sync every so \
                    often (seconds, or minutes, hours or days with m, h or d; up to a quarter more at random), and \
                    soon after a local change. For fleets whose machines would be too many connections for one \
                    server; changes from elsewhere then take up to that long to arrive.
                    """),
            CommandOption(
                name: "sync-scope", kind: .value(name: "name"),
                help: "The sync scope in the database: one per user.", defaultText: "default"),
            CommandOption(
                name: "machine-id", kind: .value(name: "id"),
                help: "This machine's id in sync (default: /etc/machine-id)."),
            CommandOption(
                name: "machine-name", kind: .value(name: "name"),
                help: """
                    This machine's name in sync, shown as the origin sync:<name> on other machines (default: the \
                    host name).
                    """),
            CommandOption(
                name: "sync-clock-offset", kind: .value(name: "milliseconds"),
                help: "Milliseconds added to this machine's clock in sync (tests).", hidden: true),
            CommandOption(
                name: "sync-process", kind: .value(name: "path"),
                help: """
                    The sync process's program, which the broker starts with sync on (default: settings-sync \
                    beside settings-broker). It alone talks to the database, in a sandbox; the broker decides what \
                    is applied.
                    """),
            CommandOption(
                name: "sync-socket", kind: .value(name: "path"),
                help: """
                    Reach the sync process at this unix socket instead of starting it: its own unit starts it, with \
                    the network this broker's unit does not have (settings-sync.socket, at \
                    %t/settingsbus/sync.socket).
                    """),
            CommandOption(
                name: "sync-restore", kind: .flag,
                help: """
                    Put back the store as it was before sync was first turned on (<store>.before-sync), moving the \
                    current one aside, then exit; the broker must not be running. Start it again without \
                    --sync-url to keep sync off.
                    """),
        ])

    var bus = "session"
    var store: String?
    var idleExit: Double?
    var durability = Durability.full
    var backupInterval: Double = 900
    var schemaDirectories: [String] = []
    var administratorFolder = "/etc/settingsbus"
    /// `--view`: nil for the default.
    var view: String?
    var pollFolders = false
    var secretReaders: String?
    var historyLimit = HistoryLimits.defaultCommits
    var historyAgeSeconds: Int64 = 30 * 86400
    var historySize = HistoryLimits.defaultBytes
    var logLevel = Logger.Level.info
    var syncUrl: String?
    var syncPasswordFile: String?
    var syncDirectories: [String] = []
    var syncPoll: String?
    var syncScope = "default"
    var machineId: String?
    var machineName: String?
    var syncClockOffset: Int64 = 0
    var syncProcess: String?
    var syncSocket: String?
    var syncRestore = false

    /// The options of a command line, each read and checked: a value the broker cannot use is a usage error.
    init(_ options: CommandLineValues) throws(UsageError) {
        bus = options.value("bus") ?? bus
        store = options.value("store")
        if options.value("idle-exit") != nil {
            idleExit = try options.value("idle-exit", 0, "a positive number of seconds") { text in
                Double(text).flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
            }
        }
        durability = try options.value("durability", durability, "full or relaxed") { Durability(rawValue: $0) }
        backupInterval = try options.value("backup-interval", backupInterval, "a number of seconds, 0 or more") { text in
            Double(text).flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
        }
        schemaDirectories = options.all("schema-dir")
        administratorFolder = options.value("admin-dir") ?? administratorFolder
        view = options.value("view")
        pollFolders = options.flag("poll-folders")
        secretReaders = options.value("secret-readers")
        historyLimit = try options.value("history-limit", historyLimit, "a number of commits, 0 or more") { text in
            Int(text).flatMap { $0 >= 0 ? $0 : nil }
        }
        historyAgeSeconds = try options.value(
            "history-age", historyAgeSeconds, "a number of seconds, or of minutes, hours or days such as 30d", Self.seconds)
        historySize = try options.value(
            "history-size", historySize, "a number of bytes, or of KiB, MiB or GiB such as 4M", Self.bytes)
        logLevel = try options.value("log-level", logLevel, "trace, debug, info, notice, warning, error or critical") {
            Logger.Level(rawValue: $0)
        }
        syncUrl = options.value("sync-url")
        syncPasswordFile = options.value("sync-password-file")
        syncDirectories = options.all("sync-dir")
        syncPoll = options.value("sync-poll")
        syncScope = options.value("sync-scope") ?? syncScope
        machineId = options.value("machine-id")
        machineName = options.value("machine-name")
        syncClockOffset = try options.value("sync-clock-offset", syncClockOffset, "a number of milliseconds") { Int64($0) }
        syncProcess = options.value("sync-process")
        syncSocket = options.value("sync-socket")
        syncRestore = options.flag("sync-restore")
        _ = try syncConfiguration()
    }

    /// Reads the command line and runs the broker. A usage error (an unknown option, a bad value) exits with
    /// status 2 (``usageStatus``), as `settingsctl` and `settings-bench` do.
    static func main() async {
        // One malloc arena for every thread: the broker's threads take turns at small allocations, and an arena
        // per thread would keep each one's free memory resident (about 0.5 MiB at rest, with the trim after
        // reading the schema folders another 1.6 MiB; settings-bench measures it).
        settingsbus_one_malloc_arena()
        let command: SettingsBrokerCommand
        do throws(UsageError) {
            switch try commandLine.parse(Array(CommandLine.arguments.dropFirst())) {
            case .help:
                print(commandLine.help, terminator: "")
                return
            case .version:
                print(SettingsBusNames.packageVersion)
                return
            case .run(let options):
                command = try SettingsBrokerCommand(options)
            }
        } catch {
            let text = Array("Error: \(error.description)\n\(commandLine.usage)\n".utf8)
            _ = text.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
            exit(usageStatus)
        }
        let status = await command.run()
        exit(status)
    }

    /// The exit status of a usage error (an unknown option, a bad value): 2, as for every SettingsBus tool.
    static let usageStatus: Int32 = 2

    /// `4096`, `512K`, `4M`, `1G` in bytes; nil for anything else.
    static func bytes(_ text: String) -> Int? {
        let units: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        let unit = text.last.flatMap { units[$0] }
        guard let count = Int(unit == nil ? Substring(text) : text.dropLast()), count >= 0 else { return nil }
        let (bytes, overflow) = count.multipliedReportingOverflow(by: unit ?? 1)
        return overflow ? nil : bytes
    }

    /// `90`, `15m`, `12h`, `30d` in seconds; nil for anything else.
    static func seconds(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last, let scale = units[last] {
            unit = scale
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int64(digits), number >= 0 else { return nil }
        let (total, overflow) = number.multipliedReportingOverflow(by: unit)
        return overflow ? nil : total
    }

    /// Runs the broker until SIGTERM, SIGINT, `--idle-exit` or the loss of the bus; returns the exit status.
    func run() async -> Int32 {
        // Everything the broker makes (the store, its log, its backup, its folder) is its user's alone: the
        // store holds the values of keys registered as secret.
        umask(0o077)
        let level = logLevel
        let journal = JournalLogHandler.standardErrorIsJournal()
        LoggingSystem.bootstrap { label in JournalLogHandler(label: label, level: level, journal: journal) }
        let logger = Logger(label: "settings-broker")
        let readers: SecretReaders
        do {
            readers = try secretReaders.map { list throws(SecretReaders.ResolutionError) in
                try SecretReaders(resolving: list)
            } ?? SecretReaders()
        } catch {
            logger.critical("\(error.description)")
            return 1
        }
        let busChoice: DBusConnection.Bus =
            switch bus {
            case "session": .session
            case "system": .system
            default: .address(bus)
            }
        let storePath = store ?? (bus == "system" ? Self.systemStorePath : Self.defaultStorePathMakingConfigHome())
        if syncRestore {
            do throws(SettingsError) {
                let aside = try DurableStore.restoreBeforeSync(storePath: storePath)
                logger.notice(
                    "the store is back as it was before sync began; the synced store was moved aside",
                    metadata: ["store": "\(storePath)", "moved-to": "\(aside)"])
                return 0
            } catch {
                logger.critical("\(error.message)")
                return 1
            }
        }
        var configuration = BrokerService.Configuration(
                bus: busChoice,
                storePath: storePath,
                durability: durability,
                idleExit: idleExit.map { .milliseconds(Int64($0 * 1000)) },
                backupInterval: .milliseconds(Int64(backupInterval * 1000)),
                schemaDirectories: schemaDirectories.isEmpty
                    ? BrokerService.Configuration.defaultSchemaDirectories(
                        environment: ProcessEnvironment.current, machineWide: bus == "system")
                    : schemaDirectories,
                administratorFolder: administratorFolder, secretReaders: readers)
        configuration.pollingFolders = pollFolders
        // The machine-wide broker confines no caller (BrokerService.Configuration.confinesSandboxedApps).
        configuration.confinesSandboxedApps = bus != "system"
        // The view is the user's: the machine-wide broker publishes none.
        if bus != "system" {
            let folder = view ?? ProcessEnvironment.current["XDG_RUNTIME_DIR"].map { $0 + "/settingsbus/view" }
            configuration.viewFolder = folder == "none" ? nil : folder
        }
        // The options were checked when they were read (init).
        if let sync = try? syncConfiguration() {
            logger.info(
                "sync is on", metadata: ["database": "\(sync.database)", "directories": "\(sync.directories.map(\.rawValue))",
                                         "machine": "\(sync.machineName)"])
            let process: SyncProcess =
                if let syncSocket { .connect(socket: syncSocket) } else {
                    .start(executable: syncProcess ?? SyncProcess.besideThisExecutable())
                }
            configuration.sync = SyncLink(configuration: sync, process: process, logger: logger)
        }
        configuration.history = HistoryLimits(
            commits: historyLimit, ageSeconds: historyAgeSeconds, bytes: historySize)
        let service = BrokerService(configuration: configuration, logger: logger)
        service.shutdown.follow(signals: [SIGTERM, SIGINT])
        do {
            try await service.run()
            return 0
        } catch let error as BrokerService.StartError {
            logger.critical("\(error.description)")
            return 1
        } catch let error as BrokerService.ConnectionLost {
            logger.error("\(error.description)")
            return Self.connectionLostStatus
        } catch {
            logger.critical("\(error)")
            return 1
        }
    }

    /// The sync configuration of the options; nil when sync is off (no --sync-url).
    func syncConfiguration() throws(UsageError) -> SyncConfiguration? {
        guard let syncUrl else {
            guard syncDirectories.isEmpty, syncPasswordFile == nil, syncPoll == nil, syncProcess == nil, syncSocket == nil
            else {
                throw UsageError(
                    "--sync-dir, --sync-password-file, --sync-poll, --sync-process and --sync-socket need --sync-url")
            }
            return nil
        }
        let address: DatabaseAddress
        do throws(SyncConfigurationError) {
            address = try DatabaseAddress(url: syncUrl)
        } catch {
            throw UsageError(error.description)
        }
        guard syncProcess == nil || syncSocket == nil else {
            throw UsageError("--sync-process starts the sync process and --sync-socket reaches one started elsewhere: give one")
        }
        guard !syncDirectories.isEmpty else {
            throw UsageError("--sync-url needs at least one --sync-dir: nothing syncs until you name a directory")
        }
        var directories: [SettingDirectory] = []
        for text in syncDirectories {
            do throws(SettingsError) {
                directories.append(try SettingDirectory(text))
            } catch {
                throw UsageError("--sync-dir: \(error.message)")
            }
        }
        guard let machine = machineId ?? SyncConfiguration.systemMachineID(), !machine.isEmpty else {
            throw UsageError("cannot read /etc/machine-id: give this machine's id with --machine-id")
        }
        var hostName = [CChar](repeating: 0, count: 256)
        gethostname(&hostName, hostName.count)
        var configuration = SyncConfiguration(
            database: address, passwordFile: syncPasswordFile, directories: directories, machineID: machine,
            machineName: machineName ?? String(decoding: hostName.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        configuration.scope = syncScope
        configuration.clockOffsetMilliseconds = syncClockOffset
        if let syncPoll {
            guard let seconds = Self.seconds(syncPoll), seconds > 0 else {
                throw UsageError(
                    "--sync-poll takes a number of seconds, or of minutes, hours or days such as 5m; not '\(syncPoll)'")
            }
            configuration.pollInterval = .seconds(seconds)
        }
        return configuration
    }

    /// The exit status after the bus connection was lost (the store closed cleanly first).
    static let connectionLostStatus: Int32 = 3

    /// The store of the machine-wide broker (`--bus system`): `settings.db` in the folder the system unit's
    /// `StateDirectory=` makes, which systemd passes in `$STATE_DIRECTORY` (the first, if it names several);
    /// `/var/lib/settingsbus/settings.db` when the variable is unset.
    static var systemStorePath: String {
        let named = ProcessEnvironment.current["STATE_DIRECTORY"]?.split(separator: ":").first
        guard let folder = named, folder.hasPrefix("/") else { return "/var/lib/settingsbus/settings.db" }
        return folder + "/settings.db"
    }

    /// ``defaultStorePath()``, after making `$XDG_CONFIG_HOME` (`~/.config`, mode `0700`) if it is missing and
    /// the folder above it exists: the broker makes the store's own folder, never a missing home folder.
    static func defaultStorePathMakingConfigHome() -> String {
        let path = defaultStorePath()
        let config = StoreFiles.directory(of: StoreFiles.directory(of: path))
        var info = stat()
        if lstat(config, &info) != 0, stat(StoreFiles.directory(of: config), &info) == 0 {
            mkdir(config, 0o700)
        }
        return path
    }

    /// `$XDG_CONFIG_HOME/settingsbus/settings.db`, with `~/.config` when the variable is unset or empty.
    static func defaultStorePath() -> String {
        let environment = ProcessEnvironment.current
        let config: String
        if let xdg = environment["XDG_CONFIG_HOME"], xdg.hasPrefix("/") {
            config = xdg
        } else {
            config = (environment["HOME"] ?? homeFolderOfThisUser()) + "/.config"
        }
        return config + "/settingsbus/settings.db"
    }

    /// The home folder of the user running the broker, from the password database (`/` when it has none).
    static func homeFolderOfThisUser() -> String {
        guard let entry = getpwuid(getuid()), let home = entry.pointee.pw_dir else { return "/" }
        return String(cString: home)
    }
}
