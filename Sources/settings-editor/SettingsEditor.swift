// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Dispatch
import Foundation
import Hummingbird
import Logging
import NIOCore
import SettingsBus
import SettingsModel

/// `settings-editor`: the settings editor, a page served to the user's browser on 127.0.0.1
/// (`settingsctl edit` starts it).
@main
struct SettingsEditor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings-editor",
        abstract: "Serve the settings editor to your browser, on 127.0.0.1 at a random port.",
        discussion: """
            The page's address carries a one-time token: the browser that opens it first gets a cookie for the \
            session, and nobody else gets in. xdg-open is handed not the address but a page in a file only you \
            can read (in $XDG_RUNTIME_DIR/settings-editor/, removed when the editor ends) that forwards to it, \
            so that the token is in no process's arguments. With --no-browser the address is the first line of \
            standard output instead. It serves until SIGINT or SIGTERM. Every change goes to the broker with \
            your own rights; the broker judges it (types, ranges, locks, secrets).
            """,
        version: SettingsBusNames.packageVersion)

    @Option(
        help: ArgumentHelp(
            "The bus: session (the default: $DBUS_SESSION_BUS_ADDRESS), system, or a D-Bus address.",
            valueName: "bus"))
    var bus: String = "session"

    @Option(help: ArgumentHelp("A D-Bus address to use as the bus (the same as --bus ADDRESS).", valueName: "address"))
    var address: String?

    @Flag(help: "Print the page's address (with its one-time token) as the first line of standard output instead of opening a browser.")
    var noBrowser = false

    @Argument(help: ArgumentHelp("The directory the page opens at.", valueName: "dir"))
    var directory: String = "/"

    /// The bus, as `--bus` and `--address` name it.
    var busArgument: String { address ?? bus }

    func validate() throws {
        if address != nil && bus != "session" {
            throw ValidationError("give either --bus or --address, not both")
        }
        if let address, address.isEmpty { throw ValidationError("--address is empty") }
        var text = directory
        if !text.hasSuffix("/"), SettingPath.isValidKey(text) { text += "/" }
        guard SettingDirectory.isValidDirectory(text) else {
            throw ValidationError("'\(directory)' is not a directory such as /org/example/")
        }
    }

    func run() async throws {
        let signalSources = Self.endOnSignals()
        var start = directory
        if !start.hasSuffix("/") { start += "/" }
        let choice: BusSettingsStore.Bus =
            switch busArgument {
            case "session": .session
            case "system": .system
            default: .address(busArgument)
            }
        let store = BusSettingsStore(bus: choice)
        // The broker must answer before the page is offered: a missing bus or broker is said at once.
        do {
            _ = try await store.call(Settings1.StatusRequest())
        } catch {
            Self.fail("settings-editor: the broker cannot be reached on the \(busArgument) bus: \(error.message)", 5)
        }
        let catalog = Catalog(store: store)
        let follower = Task { await catalog.follow() }
        await catalog.loaded()
        await catalog.walk()

        let access = Access()
        let api = EditorAPI(
            store: store, catalog: catalog, settingsctl: Self.sibling("settingsctl"), busArgument: busArgument)
        let router = EditorRoutes.router(api: api, access: access, startDirectory: start)
        var logger = Logger(label: "settings-editor")
        logger.logLevel = .error
        let openBrowser = !noBrowser
        // Connections that send no request with the session's cookie are bounded and closed in time, and so are
        // idle ones (ConnectionBook).
        let book = ConnectionBook()
        let app = Application(
            router: router,
            server: .http1(
                configuration: .init(
                    additionalChannelHandlers: [ConnectionGuard(book: book, access: access)],
                    idleTimeout: ConnectionBook.idleTimeout)),
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                guard let port = channel.localAddress?.port, let token = access.oneTimeToken else { return }
                access.listening(on: port)
                await catalog.startDescribing()
                let url = "http://127.0.0.1:\(port)/login?token=\(token)"
                if openBrowser {
                    Self.say("settings-editor: serving the editor at http://127.0.0.1:\(port)/ until interrupted")
                    // The browser is handed a file of the user's that forwards to the address, never the address:
                    // a process's arguments are readable by every user of the machine.
                    let page: String
                    do {
                        page = try OpenPage.write(forwardingTo: url)
                    } catch {
                        Self.say("settings-editor: \(error); open this address in your browser:\n\(url)")
                        return
                    }
                    if !Self.open(page) {
                        Self.say("settings-editor: no xdg-open to open a browser; open this page in yours:\n\(page)")
                    }
                } else {
                    Self.say(url)
                }
            },
            logger: logger)
        do {
            try await app.runService(gracefulShutdownSignals: [])
            OpenPage.remove()
            withExtendedLifetime(signalSources) {}
        } catch {
            follower.cancel()
            Self.fail("settings-editor: the server stopped: \(error)", 1)
        }
    }

    /// Writes a line to standard output at once.
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func fail(_ message: String, _ status: Int32) -> Never {
        OpenPage.remove()
        FileHandle.standardError.write(Data((message + "\n").utf8))
        Foundation.exit(status)
    }

    /// A program beside this one (`settingsctl`).
    static func sibling(_ name: String) -> String {
        let own = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        let path = own.deletingLastPathComponent().appendingPathComponent(name).path
        return path
    }

    /// Opens `url` with `xdg-open`, which hands it to the user's browser and returns; waits for it on a thread
    /// of its own, so that no child is left behind. xdg-open (and a browser it starts) gets every signal at its
    /// default action and unblocked, not the editor's own handling of SIGINT and SIGTERM, and none of the
    /// editor's descriptors but standard output and error.
    static func open(_ url: String) -> Bool {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
            .map { "\($0)/xdg-open" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let path else { return false }
        let pid: Int32
        do {
            pid = try ProcessSpawn.spawn(path, [url], descriptors: [1: 1, 2: 2])
        } catch {
            return false
        }
        DispatchQueue.global().async {
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        return true
    }

    /// SIGINT and SIGTERM end the editor at once: it holds nothing to write, and the broker has every change
    /// it was sent; the page that opened the browser is removed. The streams of open pages end with the process.
    ///
    /// - Returns: the signal sources, to be kept for the life of the process.
    static func endOnSignals() -> [any DispatchSourceSignal] {
        [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                OpenPage.remove()
                Foundation.exit(0)
            }
            source.resume()
            return source
        }
    }
}
