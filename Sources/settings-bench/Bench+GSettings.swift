// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBus
import SettingsBusTesting
import SettingsModel

/// The GSettings part: the GIO module `settingsbus` against dconf's GSettings backend, in a C app
/// (`gsettings-probe`, built by the package next to `settings-bench`) that differs only by `GSETTINGS_BACKEND`.
extension Bench {
    static let gsettingsSchema = "io.github.settingsbus.Bench"
    static let gsettingsPath = "/bench/gsettings/"
    /// The type names of the backends, as the probe prints them: GIO falls back to another backend when the one
    /// asked for is missing, so each run checks which it got.
    static let gsettingsBackends = [
        "settingsbus": "SettingsBusBackend", "dconf": "DConfSettingsBackend", "memory": "GMemorySettingsBackend",
    ]

    /// What the GSettings measurements need: the probe, a folder of GIO modules holding the module, and a
    /// compiled schema.
    struct GSettingsSetup {
        var probe: String
        var modules: URL
        var schemas: URL
    }

    /// `g_settings_get_value` of a watched key, `g_settings_set` reaching another app's `changed` handler, and
    /// the memory of an app that reads a schema, with each backend.
    func measureGSettings() async throws {
        let setup: GSettingsSetup
        do {
            setup = try await prepareGSettings()
        } catch {
            results.gsettingsMissing = "\(error)"
            progress("GSettings is not measured: \(error)")
            return
        }
        try await useFreshBrokerStore("gsettings")
        try await useFreshDconfDatabase()
        try await ping(broker.name)
        var run = GSettingsRun()

        let apps = Self.gsettingsReadApps
        let batches = max(1, plan.cachedReadBatches / apps)
        progress("GSettings: g_settings_get_value of a watched key (\(apps) apps × \(batches) × 1000 each)")
        let readKey = Self.gsettingsPath + "read"
        try await settings.set(SettingKey(try SettingPath(readKey), default: ""), to: "a value read through GSettings")
        var dconfGSettings = false
        if dconf != nil {
            try await dconfChange([(readKey, "a value read through GSettings")])
            do {
                _ = try await gsettingsRead(setup, backend: "dconf", batches: 1)
                dconfGSettings = true
            } catch let failure as BenchFailure {
                run.dconfMissing = failure.description
                progress("dconf's GSettings backend is not measured: \(failure)")
            }
        }
        // One app's time per read depends on the app (the same app, started again, reads in 1.06 or 1.7 µs with
        // either backend): several apps per backend, taking turns, and the median of their medians.
        let backends = ["settingsbus"] + (dconfGSettings ? ["dconf"] : [])
        var reads: [String: Samples] = [:]
        for _ in 0..<apps {
            for backend in backends {
                reads[backend, default: Samples()].append(try await gsettingsRead(setup, backend: backend, batches: batches))
            }
        }
        run.read = reads["settingsbus"]?.p50
        run.dconfRead = reads["dconf"]?.p50

        progress("GSettings: g_settings_set → another app's changed handler (\(plan.deliveries) writes each)")
        let deliveries = try await gsettingsDelivery(setup, backends: backends)
        run.delivery = deliveries["settingsbus"] ?? Samples()
        run.dconfDelivery = deliveries["dconf"] ?? Samples()

        progress("GSettings: a gsettings get process, start to exit (\(Self.getProcesses) with each backend, then with the broker stopped)")
        try await waitForTheView()
        for _ in 0..<Self.getProcesses {
            for backend in backends {
                run.getProcess[backend, default: Samples()].append(try await gsettingsGetProcess(setup, backend: backend).elapsed)
            }
        }
        if let pid = broker.pid, kill(pid, SIGSTOP) == 0 {
            do {
                for _ in 0..<Self.getProcessesStopped {
                    let (elapsed, stored) = try await gsettingsGetProcess(setup, backend: "settingsbus", mustRead: false)
                    run.getProcessStopped.append(elapsed)
                    if !stored { run.getProcessStoppedWrong += 1 }
                }
            } catch {
                kill(pid, SIGCONT)
                throw error
            }
            kill(pid, SIGCONT)
        }
        try await measurePythonApps(setup, backends: backends, into: &run)

        progress("GSettings: memory of an app that reads a schema, with each backend")
        for backend in ["memory"] + backends {
            run.memory[backend] = try await gsettingsMemory(setup, backend: backend)
        }
        results.gsettings = run
    }

    /// Finds the probe and the module next to this executable, links the module into a folder of GIO modules
    /// of its own (GIO loads every module of a folder it is given) and compiles the schema.
    private func prepareGSettings() async throws -> GSettingsSetup {
        let probe: String
        let module: String
        do {
            probe = try BuiltProduct.path("gsettings-probe")
            module = try BuiltProduct.path("libsettingsbus-gio.so")
        } catch {
            throw BenchFailure(
                "\(error) (a release build: scripts/build-release --product gsettings-probe, and --product "
                    + "settingsbus-gio)")
        }
        let folder = root.appendingPathComponent("gsettings")
        let modules = folder.appendingPathComponent("modules")
        let schemas = folder.appendingPathComponent("schemas")
        try FileManager.default.createDirectory(at: modules, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: schemas, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: modules.appendingPathComponent("libsettingsbus-gio.so").path, withDestinationPath: module)
        let appSchemas = (0..<Self.pythonAppSchemas).map { index in
            """
              <schema id="\(Self.gsettingsSchema).App\(index)" path="\(Self.gsettingsPath)app\(index)/">
            \((0..<Self.pythonAppKeys).map { "    <key name=\"key\($0)\" type=\"s\"><default>''</default></key>" }.joined(separator: "\n"))
              </schema>
            """
        }
        let schema = """
            <schemalist>
              <schema id="\(Self.gsettingsSchema)" path="\(Self.gsettingsPath)">
                <key name="read" type="s"><default>''</default></key>
                <key name="delivery" type="s"><default>''</default></key>
              </schema>
            \(appSchemas.joined(separator: "\n"))
            </schemalist>
            """
        try schema.write(
            to: schemas.appendingPathComponent("\(Self.gsettingsSchema).gschema.xml"), atomically: true, encoding: .utf8)
        let compiled = try await TestProcess.run("/usr/bin/glib-compile-schemas", [schemas.path])
        guard compiled.status == 0 else {
            throw BenchFailure(
                "glib-compile-schemas failed (apt-get install -y libglib2.0-bin): \(compiled.stdout) \(compiled.stderr)")
        }
        return GSettingsSetup(probe: probe, modules: modules, schemas: schemas)
    }

    /// The run's environment for an app with `backend`; the module's folder is given to every backend alike.
    private func gsettingsEnvironment(_ setup: GSettingsSetup, backend: String) -> [String: String] {
        environment.merging([
            "GSETTINGS_BACKEND": backend, "GIO_EXTRA_MODULES": setup.modules.path,
            "GSETTINGS_SCHEMA_DIR": setup.schemas.path,
        ]) { _, new in new }
    }

    /// Checks the probe's first line, `backend <type name>`.
    private func checkBackend(_ line: String?, _ backend: String) throws {
        let expected = Self.gsettingsBackends[backend] ?? backend
        guard line == "backend \(expected)" else {
            throw BenchFailure(
                "GIO did not use the \(backend) backend (\(line ?? "no line"))"
                    + (backend == "dconf" ? "; apt-get install -y dconf-gsettings-backend" : ""))
        }
    }

    /// How many `gsettings get` processes are timed with each backend, and with the broker stopped.
    static let getProcesses = 30
    static let getProcessesStopped = 10

    /// One `gsettings get` of the read key with `backend`, from the process's start to its exit (ns), and whether it
    /// read the stored value; unless `mustRead` is false, one that did not fails the run.
    private func gsettingsGetProcess(
        _ setup: GSettingsSetup, backend: String, mustRead: Bool = true
    ) async throws -> (elapsed: Double, stored: Bool) {
        let start = monotonicNanoseconds()
        let result = try await TestProcess.run(
            "/usr/bin/gsettings", ["get", Self.gsettingsSchema, "read"], environment: gsettingsEnvironment(setup, backend: backend))
        let elapsed = Double(monotonicNanoseconds() - start)
        let stored = result.status == 0 && result.stdout == "'a value read through GSettings'\n"
        guard stored || !mustRead else {
            throw BenchFailure("gsettings get (\(backend)) failed: \(result.stdout) \(result.stderr)")
        }
        return (elapsed, stored)
    }

    /// The python3-gi app: `Gio.Settings.new` of this many schemas, and a read of each of their keys.
    static let pythonAppSchemas = 5
    static let pythonAppKeys = 10
    static let pythonApps = 10

    /// An app of python3-gi, timed from its start to the line it prints after its last read.
    static var pythonApp: String {
        """
        import gi
        gi.require_version('Gio', '2.0')
        from gi.repository import Gio
        objects = [Gio.Settings.new('\(gsettingsSchema).App%d' % i) for i in range(\(pythonAppSchemas))]
        values = [o.get_string('key%d' % k) for o in objects for k in range(\(pythonAppKeys))]
        print(len(values), values[0], flush=True)
        """
    }

    /// A python3-gi app that makes 5 GSettings objects and reads 50 keys, with each backend taking turns, then
    /// with the broker stopped: start to the last read. Half the keys hold a stored value, in both stores.
    private func measurePythonApps(_ setup: GSettingsSetup, backends: [String], into run: inout GSettingsRun) async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            run.pythonMissing = "/usr/bin/python3 is missing (apt-get install -y python3-gi)"
            return
        }
        progress("GSettings: a python3-gi app, 5 schemas and 50 reads (\(Self.pythonApps) with each backend, then with the broker stopped)")
        var stored: [(String, String)] = []
        for schema in 0..<Self.pythonAppSchemas {
            for key in stride(from: 0, to: Self.pythonAppKeys, by: 2) {
                stored.append(("\(Self.gsettingsPath)app\(schema)/key\(key)", "stored \(schema).\(key)"))
            }
        }
        for (path, value) in stored {
            try await settings.set(SettingKey(try SettingPath(path), default: ""), to: value)
        }
        if backends.contains("dconf") { try await dconfChange(stored) }
        try await waitForTheView()
        for _ in 0..<Self.pythonApps {
            for backend in backends {
                guard let elapsed = try await pythonAppRun(setup, backend: backend, into: &run) else { return }
                run.pythonApp[backend, default: Samples()].append(elapsed)
            }
        }
        guard let pid = broker.pid, kill(pid, SIGSTOP) == 0 else { return }
        defer { kill(pid, SIGCONT) }
        for _ in 0..<Self.pythonApps {
            guard let elapsed = try await pythonAppRun(setup, backend: "settingsbus", into: &run) else { return }
            run.pythonAppStopped.append(elapsed)
        }
    }

    /// One python3-gi app's start to the line after its last read (ns); nil when it did not read the stored values
    /// (why is in `run.pythonMissing`).
    private func pythonAppRun(_ setup: GSettingsSetup, backend: String, into run: inout GSettingsRun) async throws -> Double? {
        let start = monotonicNanoseconds()
        let app = try RunningProcess.start(
            "/usr/bin/python3", ["-c", Self.pythonApp], environment: gsettingsEnvironment(setup, backend: backend))
        let line = try await app.nextLine()
        let elapsed = Double(monotonicNanoseconds() - start)
        let status = await app.waitForExit()
        let expected = "\(Self.pythonAppSchemas * Self.pythonAppKeys) stored 0.0"
        guard status == 0, line == expected else {
            run.pythonMissing = "the python3-gi app (\(backend)) printed \(line ?? "nothing"), status \(status): "
                + (await app.standardError())
            progress("the python3-gi app is not measured: \(run.pythonMissing ?? "")")
            return nil
        }
        return elapsed
    }

    /// How many apps read the watched key with each backend.
    static let gsettingsReadApps = 5

    /// `g_settings_get_value` of the watched key `read` in one app: the median time per read over `batches`
    /// batches of 1000.
    private func gsettingsRead(_ setup: GSettingsSetup, backend: String, batches: Int) async throws -> Double {
        let result = try await TestProcess.run(
            setup.probe, ["read", Self.gsettingsSchema, "read", String(batches)],
            environment: gsettingsEnvironment(setup, backend: backend))
        let lines = result.stdout.split(separator: "\n").map(String.init)
        try checkBackend(lines.first, backend)
        let fields = lines.dropFirst().first?.split(separator: " ") ?? []
        guard result.status == 0, fields.count == 3, fields[0] == "read", let perRead = Double(fields[1]),
            let characters = Int(fields[2]), characters > 0
        else {
            throw BenchFailure("the GSettings probe (\(backend)) failed: \(result.stdout) \(result.stderr)")
        }
        return perRead
    }

    /// A writer app and a watcher app per backend; the backends take turns, one `g_settings_set` each, timed
    /// from the writer's time stamp before its call to the watcher's in its `changed` handler.
    private func gsettingsDelivery(_ setup: GSettingsSetup, backends: [String]) async throws -> [String: Samples] {
        let key = Self.gsettingsPath + "delivery"
        try await settings.set(SettingKey(try SettingPath(key), default: ""), to: "initial")
        if backends.contains("dconf") { try await dconfChange([(key, "initial")]) }
        var apps: [(backend: String, watcher: RunningProcess, writer: RunningProcess)] = []
        do {
            return try await gsettingsDelivery(apps: &apps, setup: setup, backends: backends)
        } catch {
            // Every app is ended by its pid, however the measurement ends.
            for app in apps {
                await app.watcher.terminate()
                await app.writer.terminate()
            }
            throw error
        }
    }

    private func gsettingsDelivery(
        apps: inout [(backend: String, watcher: RunningProcess, writer: RunningProcess)], setup: GSettingsSetup,
        backends: [String]
    ) async throws -> [String: Samples] {
        for backend in backends {
            let environment = gsettingsEnvironment(setup, backend: backend)
            let watcher = try RunningProcess.start(setup.probe, ["watch", Self.gsettingsSchema, "delivery"], environment: environment)
            let writer = try RunningProcess.start(setup.probe, ["write", Self.gsettingsSchema, "delivery"], environment: environment)
            apps.append((backend, watcher, writer))
            try checkBackend(try await watcher.nextLine(), backend)
            try checkBackend(try await writer.nextLine(), backend)
            try await watcher.line(where: { $0.hasPrefix("initial ") })
            try await writer.line(where: { $0 == "ready" })
        }
        var samples: [String: Samples] = [:]
        let warmUp = plan.warmUp / 10
        try await boundedLoop(count: warmUp + plan.deliveries, seconds: plan.loopSeconds * 2) { index in
            for app in apps {
                let value = "value-\(index)"
                app.writer.write(value + "\n")
                let start = try await stamp(of: value, from: app.writer)
                let seen = try await stamp(of: value, from: app.watcher)
                if index >= warmUp { samples[app.backend, default: Samples()].append(Double(seen &- start)) }
            }
        }
        var failure: BenchFailure?
        for app in apps {
            app.writer.closeInput()
            if await app.writer.waitForExit() != 0 {
                failure = BenchFailure("the GSettings writer (\(app.backend)) failed: \(await app.writer.standardError())")
            }
            await app.watcher.terminate()
        }
        apps.removeAll()
        if let failure { throw failure }
        return samples
    }

    /// The time stamp of the line `<value> <ns>` a probe prints.
    private func stamp(of value: String, from app: RunningProcess) async throws -> UInt64 {
        let (line, _) = try await app.line(where: { $0.hasPrefix(value + " ") })
        guard let stamp = line.split(separator: " ").last.flatMap({ UInt64($0) }) else {
            throw BenchFailure("unexpected line from a GSettings probe: \(line)")
        }
        return stamp
    }

    /// The memory of an app that has loaded GIO with `backend` and read a key of a schema (the run with the
    /// median private memory of `plan.gsettingsMemoryRuns`).
    private func gsettingsMemory(_ setup: GSettingsSetup, backend: String) async throws -> ProcessMemory? {
        var runs: [ProcessMemory] = []
        for _ in 0..<max(plan.gsettingsMemoryRuns, 1) {
            let app = try RunningProcess.start(
                setup.probe, ["hold", Self.gsettingsSchema, "read"], environment: gsettingsEnvironment(setup, backend: backend))
            do {
                try checkBackend(try await app.nextLine(), backend)
                try await app.line(where: { $0 == "ready" })
            } catch {
                await app.terminate()
                throw error
            }
            let memory = ProcessMemory.read(pid: app.child.pid)
            app.closeInput()
            _ = await app.waitForExit()
            if let memory { runs.append(memory) }
        }
        let sorted = runs.sorted { $0.privateKiB < $1.privateKiB }
        return sorted.isEmpty ? nil : sorted[sorted.count / 2]
    }
}

/// The GSettings part: the module `settingsbus` and dconf's backend, in the same C app.
struct GSettingsRun: Sendable {
    /// `g_settings_get_value` of a watched key, ns per read: the median of several apps' medians of batches
    /// of 1000.
    var read: Double?
    var dconfRead: Double?
    /// `g_settings_set` in one app → the `changed` handler of another.
    var delivery = Samples()
    var dconfDelivery = Samples()
    /// Backend → a `gsettings get` process, from its start to its exit; the module's with the broker stopped.
    var getProcess: [String: Samples] = [:]
    var getProcessStopped = Samples()
    /// How many of those read something else than the stored value (the schema's default).
    var getProcessStoppedWrong = 0
    /// Backend → a python3-gi app's start to its last read (5 schemas, 50 reads); the module's with the broker
    /// stopped.
    var pythonApp: [String: Samples] = [:]
    var pythonAppStopped = Samples()
    /// Why the python3-gi app was not measured, or not with every backend.
    var pythonMissing: String?
    /// Backend (`memory`, `settingsbus`, `dconf`) → the memory of an app that read a schema with it.
    var memory: [String: ProcessMemory] = [:]
    /// Why dconf's GSettings backend was not measured, when dconf-service was.
    var dconfMissing: String?
}
