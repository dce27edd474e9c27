// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import SettingsModel

/// `settings-bench`: measures SettingsBus and dconf side by side on a private bus and prints one table.
@main
struct SettingsBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings-bench",
        abstract: "Measure SettingsBus and dconf side by side on a private D-Bus and print one Markdown table.",
        discussion: """
            Build and run it in release: scripts/bench. It starts its own dbus-daemon, the settings-broker \
            next to it and, when installed, dconf-service (apt-get install -y dconf-service dconf-cli \
            libdconf-dev gcc), with XDG_CONFIG_HOME, XDG_RUNTIME_DIR and HOME in a temporary directory: it \
            never touches your session bus or your settings. Progress goes to standard error, the table to \
            standard output. --smoke runs every measurement with tiny counts, in seconds. Exit status: 0 \
            when every measurement ran, 1 when one failed, 2 for a usage error.
            """,
        version: SettingsBusNames.packageVersion)

    /// Parses the command line and runs; a usage error exits with status 2, as `settingsctl` and
    /// `settings-broker` do, instead of ArgumentParser's 64.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            Foundation.exit(2)
        }
    }

    @Flag(help: "Run every measurement with tiny counts, to check that the benchmark works.")
    var smoke = false

    @Option(
        parsing: .upToNextOption,
        help: """
            Run only these parts: basics, delivery, writers, sizes, directories, administrator, sandbox, gsettings, sync, \
            editor \
            (the table then has gaps).
            """)
    var only: [String] = []

    @Option(help: .hidden)
    var role: String?

    @Option(help: .hidden)
    var system: String = "settingsbus"

    @Option(help: .hidden)
    var bus: String?

    @Option(help: .hidden)
    var key: String?

    @Option(help: .hidden)
    var executor: String = "global"

    @Option(help: .hidden)
    var layer: String = "store"

    @Option(help: .hidden)
    var stream: String = "values"

    @Option(help: .hidden)
    var prefix: String?

    @Option(help: .hidden)
    var id: Int = 0

    @Option(help: .hidden)
    var seconds: Double = 1

    func run() async throws {
        switch role {
        case nil:
            try await runBenchmark()
        case "subscriber":
            guard let bus, let key else { throw ValidationError("--role subscriber needs --bus and --key") }
            guard ["global", "connection"].contains(executor) else {
                throw ValidationError("unknown --executor \(executor); use global or connection")
            }
            switch layer {
            case "store":
                guard ["values", "changes"].contains(stream) else {
                    throw ValidationError("unknown --stream \(stream); use values or changes")
                }
                try await Roles.subscriber(
                    address: bus, key: key, onConnectionThread: executor == "connection", changes: stream == "changes")
            case "connection", "stream":
                try await Roles.layerSubscriber(address: bus, key: key, throughStream: layer == "stream")
            default:
                throw ValidationError("unknown --layer \(layer); use store, connection or stream")
            }
        case "identify":
            guard let bus, let key else { throw ValidationError("--role identify needs --bus and --key") }
            try await Roles.identify(address: bus, key: key, count: max(id, 1))
        case "writer":
            guard let bus, let prefix else { throw ValidationError("--role writer needs --bus and --prefix") }
            try await Roles.writer(system: system, address: bus, prefix: prefix, id: id, seconds: seconds)
        case let other?:
            throw ValidationError("unknown --role \(other)")
        }
    }

    func validate() throws {
        let parts: Set = [
            "basics", "delivery", "writers", "sizes", "directories", "administrator", "sandbox", "gsettings", "sync",
            "editor",
        ]
        if let unknown = only.first(where: { !parts.contains($0) }) {
            throw ValidationError(
                "unknown part '\(unknown)'; use basics, delivery, writers, sizes, directories, administrator, "
                    + "sandbox, gsettings, sync or editor")
        }
    }

    private func runBenchmark() async throws {
        let plan = smoke ? BenchPlan.smoke : BenchPlan.full
        let began = monotonicNanoseconds()
        let bench = try await Bench.prepare(plan: plan)
        if let missing = bench.dconfMissing { progress("dconf is not measured: \(missing)") }
        do {
            let parts =
                only.isEmpty
                ? [
                    "basics", "delivery", "writers", "sizes", "directories", "administrator", "sandbox", "gsettings",
                    "sync", "editor",
                ] : only
            if parts.contains("basics") { try await bench.measureBasics() }
            if parts.contains("delivery") { try await bench.measureDelivery() }
            if parts.contains("writers") { try await bench.measureWriters() }
            if parts.contains("sizes") { try await bench.measureSizes() }
            if parts.contains("directories") { try await bench.measureDirectories() }
            if parts.contains("administrator") { try await bench.measureAdministrator() }
            if parts.contains("sandbox") { try await bench.measureSandbox() }
            if parts.contains("gsettings") { try await bench.measureGSettings() }
            if parts.contains("sync") { try await bench.measureSync() }
            if parts.contains("editor") { try await bench.measureEditor() }
        } catch {
            progress("failed: \(error)")
            await bench.finish()
            throw ExitCode(1)
        }
        let report = BenchReport(
            results: bench.results, plan: plan, dconfMissing: bench.dconfMissing, isSmoke: smoke)
        await bench.finish()
        progress(String(format: "done in %.0f s", Double(monotonicNanoseconds() - began) / 1e9))
        print(report.markdown(), terminator: "")
    }
}
