// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import CSandbox
import DBus
import Dispatch
import Foundation
import Logging
import SettingsModel
import SettingsSync
import SyncProtocol

/// `settings-sync`: the sync process of a settings broker. It holds the connection to the sync database and
/// nothing of the store: the broker starts it, or its socket unit does, and it serves that one broker.
@main
struct SettingsSyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings-sync",
        abstract: "Sync a SettingsBus broker's store with a PostgreSQL database, for that broker.",
        discussion: """
            Not run by hand: settings-broker starts it when it is given --sync-url, with one end of a socket \
            pair (--channel-fd), or a systemd socket unit (settings-sync.socket) starts it when the broker \
            connects to its socket (--sync-socket). The broker sends the configuration; this process reads \
            the database's password and talks to the database, and the broker decides what is applied. Once \
            it has its configuration it restricts itself with Landlock where the kernel has it: files only \
            read, and only the system's folders, the password file and the certificate authorities' file; TCP \
            only to the database's port. It exits 0 when the broker closes the channel, 1 when it cannot \
            serve, 2 for a usage error.
            """,
        version: SettingsBusNames.packageVersion)

    @Option(help: "The descriptor of the channel to the broker (a connected unix stream socket).")
    var channelFd: Int32?

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    @Option(
        name: .customLong("check-sandbox"),
        help: ArgumentHelp(
            """
            Restrict this process as for a database whose password file is ALLOWED, then try to read each FILE \
            and say which can be read, and exit (a check of the sandbox).
            """, valueName: "allowed"), completion: .file())
    var checkSandbox: String?

    @Argument(help: ArgumentHelp("The files to try to read, with --check-sandbox.", valueName: "file"))
    var files: [String] = []

    func validate() throws {
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("unknown --log-level '\(logLevel)'; use trace, debug, info, notice, warning, error or critical")
        }
        if checkSandbox == nil, !files.isEmpty { throw ValidationError("files to read are given with --check-sandbox") }
    }

    /// Runs on the main thread alone until the sandbox is on: Landlock and no_new_privs hold for the thread
    /// that asks and the threads it starts afterwards, so the greeting is read with blocking calls and the
    /// engine's tasks, dispatch queues and NIO's threads all start after it.
    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let journal = JournalLogHandler.standardErrorIsJournal()
        LoggingSystem.bootstrap { label in JournalLogHandler(label: label, level: level, journal: journal) }
        let logger = Logger(label: "settings-sync")
        if let allowed = checkSandbox {
            let configuration = SyncConfiguration(
                database: DatabaseAddress(
                    host: "localhost", socketFolder: nil, port: 5432, user: "check", database: "check",
                    sslMode: "disable", rootCertificateFile: nil),
                passwordFile: allowed, directories: [], machineID: "check", machineName: "check")
            print("sandbox: \(Sandbox.restrict(for: configuration, environment: ProcessInfo.processInfo.environment))")
            for file in files {
                let descriptor = open(file, O_RDONLY | O_CLOEXEC)
                print("\(file): \(descriptor >= 0 ? "read" : "refused (\(String(cString: strerror(errno))))")")
                if descriptor >= 0 { close(descriptor) }
            }
            return
        }
        let descriptor: Int32
        if let channelFd {
            // The broker's child. No parent-death signal: the kernel sends it when the thread that started
            // the process ends, which a broker's worker thread may do any time; the broker's end of the
            // channel is close-on-exec and closes when the broker ends, which ends this process.
            descriptor = channelFd
        } else if let socket = Self.activationSocket() {
            descriptor = settingsbus_accept(socket)
            guard descriptor >= 0 else {
                logger.critical("cannot take the broker's connection: \(String(cString: strerror(-descriptor)))")
                throw ExitCode(1)
            }
            close(socket)
        } else {
            logger.critical("no channel to a broker: settings-broker starts this with --channel-fd, or a socket unit does")
            throw ExitCode(2)
        }
        let greeting: BrokerLink.Greeting
        do {
            greeting = try BrokerLink.greet(descriptor)
        } catch {
            logger.critical("the broker did not take this sync process", metadata: ["error": "\(error)"])
            throw ExitCode(1)
        }
        let environment = ProcessInfo.processInfo.environment
        let sandbox = Sandbox.restrict(for: greeting.configuration, environment: environment)
        logger.info("sync process started", metadata: ["database": "\(greeting.configuration.database)", "sandbox": "\(sandbox)"])
        Task {
            let channel = MessageChannel(descriptor: descriptor, label: "settings-sync")
            let engine = SyncEngine(
                configuration: greeting.configuration, logger: logger, environment: environment,
                broker: BrokerLink(channel: channel))
            engine.start(cursor: greeting.cursor, joined: greeting.joined)
            for await message in channel.incoming where message.kind == .signal && message.member == SyncCall.wake {
                engine.wakeUp()
            }
            await engine.stop()
            Foundation.exit(0)
        }
        dispatchMain()
    }

    /// The listening socket systemd passed (`LISTEN_FDS`, sd_listen_fds(3)), when it was passed to this
    /// process.
    static func activationSocket() -> Int32? {
        let environment = ProcessInfo.processInfo.environment
        guard environment["LISTEN_PID"].flatMap(Int32.init) == getpid(),
            let count = environment["LISTEN_FDS"].flatMap(Int.init), count >= 1
        else { return nil }
        return 3
    }
}
