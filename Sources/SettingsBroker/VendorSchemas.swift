// SPDX-License-Identifier: Apache-2.0

// Design note: schema files that apps install.
//
// An app installs its schemas as files (`*.schema`, the format of `settingsctl register`) in
// `$XDG_DATA_HOME/settingsbus/schemas/` or in `settingsbus/schemas/` under a folder of `$XDG_DATA_DIRS`. The
// broker reads them all at start, before it takes its bus name, and registers them as any client's
// `Register` would, through the same store and rules. A key given by files in two folders takes the schema of
// the first folder in that order (`$XDG_DATA_HOME` first), as GLib does with its schema folders.
//
// While it runs, inotify tells it of files written, moved in, moved out or removed in those folders; 100 ms
// after the last such event it reads every file again and registers what changed. A file that cannot be read
// or parsed, or whose schemas the store refuses, is skipped as a whole (one commit per file): the schemas it
// registered before stay in force, the broker logs the file and line, and `Status` lists the problem until
// the file is fixed. A removed file's schemas stay registered. A folder made after the broker started (the
// user's folder, made when the first app installs its schema) is followed from when it appears: the nearest
// folder above it that exists is followed for the making of the next folder down, and no other change there.
//
// Files are read within bounds (``FileBounds``): 1 MiB a file (a larger one is refused by name, before it is
// read), the first 1,000 files of a folder, 16 MiB a folder; a problem quotes a line by a short prefix, and
// `Status` lists at most 20 problems.
//
// GNOME's GSettings schema sources (`glib-2.0/schemas/*.gschema.xml` beside each `settingsbus/schemas` folder)
// are read in the same readings, after these files: see `VendorSchemas+GSettings.swift`.

import CSandbox
import DBus
import Dispatch
import Glibc
import SettingsModel

/// The schema files installed by apps, registered at start and followed while the broker runs.
final class VendorSchemas: Sendable {
    /// A file that was skipped, and why.
    typealias Problem = FileProblem

    /// What happened to a file, for the log.
    enum Event: Sendable {
        case registered(file: String, keys: Int)
        case skipped(Problem)
        /// The GSettings schema sources were read: how many files, how many keys they place, and the ids of
        /// the relocatable schemas whose keys were skipped.
        case gsettingsSchemas(files: Int, keys: Int, relocatable: [String])
        /// inotify could not be had: the folders are looked at once a second.
        case polling
    }

    /// The folders searched, first first.
    let directories: [String]
    /// The folders of GSettings schema sources searched, first first, after ``directories``.
    let gsettingsDirectories: [String]
    private let writes: WritePath
    private var store: DurableStore { writes.store }
    private let report: @Sendable (Event) -> Void
    private let queue: DispatchQueue
    private let folders: FolderWatch
    private let pollingFolders: Bool
    private let state = Locked(State())

    /// The problems of the last reading, by the file (a file skipped whole) or by the problem itself (a
    /// GSettings schema source, which may have several).
    typealias Problems = [String: Problem]

    private struct State {
        var files: [String] = []
        var problems: Problems = [:]
        /// What the last reading of the GSettings sources reported: files, keys and relocatable schemas.
        var gsettings: (files: Int, keys: Int, relocatable: [String])?
        /// Whether the readings include the GSettings sources: from ``startGSettings()`` on.
        var includesGSettings = false
        /// Set by ``stop()``: no reading after it.
        var stopped = false
    }

    /// - Parameter gsettingsDirectories: the folders of GSettings schema sources; nil for those beside each of
    ///   `directories` that is a `settingsbus/schemas` folder (``gsettingsDirectories(besides:)``).
    init(
        directories: [String], gsettingsDirectories: [String]? = nil, writes: WritePath, pollingFolders: Bool = false,
        report: @escaping @Sendable (Event) -> Void
    ) {
        self.directories = directories
        self.gsettingsDirectories = gsettingsDirectories ?? Self.gsettingsDirectories(besides: directories)
        self.writes = writes
        self.report = report
        queue = DispatchQueue(label: "settings-vendor-schemas")
        folders = FolderWatch(queue: queue, alwaysLook: pollingFolders)
        self.pollingFolders = pollingFolders
    }

    /// The folders of `$XDG_DATA_HOME` (default `~/.local/share`; not for a machine-wide broker) and
    /// `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`), each with `settingsbus/schemas` appended.
    static func defaultDirectories(environment: [String: String], machineWide: Bool = false) -> [String] {
        var bases: [String] = []
        if !machineWide {
            if let home = environment["XDG_DATA_HOME"], home.hasPrefix("/") {
                bases.append(home)
            } else if let home = environment["HOME"], home.hasPrefix("/") {
                bases.append(home + "/.local/share")
            }
        }
        let dirs = environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        bases += dirs.split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
        var seen = Set<String>()
        return bases.map { $0 + "/settingsbus/schemas" }.filter { seen.insert($0).inserted }
    }

    /// Follows the folders, then reads and registers every file; returns once the first reading is done.
    func start() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async {
                self.reload()
                if self.folders.isPolling, !self.pollingFolders { self.report(.polling) }
                done.resume()
            }
        }
    }

    /// Reads the GSettings sources too, from now on: once now, on the folders' queue (it does not wait for
    /// the reading), then whenever the folders change. The broker calls it after it takes its bus name: GNOME's
    /// sources are many and change only with the packages that install them, and their schemas are in the
    /// store already from the broker's earlier runs, so callers need not wait for a reading that finds them
    /// unchanged (a quarter of the start of a broker with an empty store). A GSettings app that reads a key
    /// before its first registration gets no value from the broker, and its schema's default from GLib.
    func startGSettings() {
        guard !gsettingsDirectories.isEmpty else { return }
        queue.async {
            let go = self.state.withLock { state -> Bool in
                state.includesGSettings = true
                return !state.stopped
            }
            if go { self.reload() }
        }
    }

    /// Stops following the folders; returns once a reading under way is done (none starts after).
    func stop() {
        state.withLock { $0.stopped = true }
        folders.stop()
        queue.sync {}
    }

    /// What `Status` reports: `schema-files` (u, the files read) and `schema-problems` (as, one line per file
    /// skipped, with its line and the reason: at most ``FileBounds/listedProblems``, then how many more).
    func status() -> [String: DBusValue] {
        state.withLock { state in
            [
                "schema-files": .uint32(UInt32(clamping: state.files.count)),
                "schema-problems": .array(
                    .string, FileBounds.listed(state.problems.values.map(\.description)).map(DBusValue.string)),
            ]
        }
    }

    // MARK: - Reading

    /// Follows the folders (those made since too), then reads every file and registers what changed, file by
    /// file. Runs on ``queue``.
    ///
    /// Every file is read and parsed before any is registered, and what that found is in `Status` by then:
    /// a client that hears of one file's registration (its `Changed`) finds a broken file beside it listed.
    private func reload() {
        let (includesGSettings, stopped) = state.withLock { ($0.includesGSettings, $0.stopped) }
        guard !stopped else { return }
        let followed = directories + (includesGSettings ? gsettingsDirectories : [])
        folders.watch(FolderWatch.following(followed)) { [weak self] in self?.reload() }
        let previous = state.withLock { $0.problems }
        var files: [String] = []
        var problems: Problems = [:]
        var parsed: [(file: String, schemas: [SettingPath: SettingSchema])] = []
        for directory in directories {
            let contents = BoundedFile.readFolder(directory) { $0.hasSuffix(".schema") && !$0.hasPrefix(".") }
            for problem in contents.problems { problems[problem.file] = skip(problem, previous: previous) }
            for (file, text) in contents.files {
                files.append(file)
                switch text {
                case .success(let text):
                    do throws(SchemaFile.Problem) {
                        parsed.append((file, try SchemaFile(parsing: text).schemas))
                    } catch {
                        problems[file] = skip(Problem(file: file, line: error.line, message: error.message), previous: previous)
                    }
                case .failure(let refused): problems[file] = skip(refused, previous: previous)
                }
            }
        }
        // The GSettings schema sources come after the broker's own files: a key both give has the schema of
        // the broker's own file.
        let gsettings = includesGSettings ? readGSettingsSchemas(previous: previous) : GSettingsReading()
        files += gsettings.files
        problems.merge(gsettings.problems) { own, _ in own }
        parsed += gsettings.schemas.files
        // A file the store refused before stays listed while it is registered again.
        var meanwhile = problems
        for (file, _) in parsed { meanwhile[file] = previous[file] }
        publish(files, meanwhile)
        var claimed = Set<SettingPath>()
        // A GSettings source replaces what the store holds, as glib-compile-schemas would: a package's new version
        // may narrow a key (fewer choices), and a value it refuses is kept, not served (decision 0013).
        let gsettingsFiles = Set(gsettings.files)
        for (file, schemas) in parsed {
            let replacing = gsettingsFiles.contains(file)
            if let problem = register(file, schemas, replacing: replacing, skipping: &claimed, previous: previous) {
                problems[file] = problem
            }
        }
        publish(files, problems)
        // Said again only when it changed: a reading for another folder's change repeats nothing.
        let read = (files: gsettings.files.count, keys: gsettings.schemas.keyCount, relocatable: gsettings.schemas.relocatable)
        let changed = state.withLock { state in
            defer { state.gsettings = read }
            return state.gsettings.map { $0 != read } ?? true
        }
        if changed, includesGSettings { report(.gsettingsSchemas(files: read.files, keys: read.keys, relocatable: read.relocatable)) }
        // A reading parses every source again and leaves the heap larger than what it keeps (GNOME's sources are
        // about 1.5 MiB of it at start): what is free goes back to the system, for the broker's idle memory.
        settingsbus_release_free_memory()
    }

    private func publish(_ files: [String], _ problems: Problems) {
        state.withLock { state in
            state.files = files
            state.problems = problems
        }
    }

    /// Registers the schemas of one file that no earlier file claimed; nil when that worked.
    private func register(
        _ file: String, _ parsed: [SettingPath: SettingSchema], replacing: Bool, skipping claimed: inout Set<SettingPath>,
        previous: Problems
    ) -> Problem? {
        let mine = parsed.filter { !claimed.contains($0.key) }.sorted { $0.key < $1.key }
        claimed.formUnion(mine.map(\.key))
        let changed = mine.filter { key, schema in store.registeredSchema(key) != schema }
        guard !changed.isEmpty else { return nil }
        let result = Locked<Result<UInt64, SettingsError>?>(nil)
        let semaphore = DispatchSemaphore(value: 0)
        var changeset = Changeset(registrations: changed.map { ($0.key, $0.value) }, origin: "schema file \(file)")
        changeset.replacing = replacing
        writes.write(
            changeset,
            for: .then { outcome in
                result.withLock { $0 = outcome }
                semaphore.signal()
            })
        semaphore.wait()
        switch result.withLock({ $0 }) {
        case .failure(let error)?:
            return skip(Problem(file: file, line: nil, message: error.message), previous: previous)
        default:
            report(.registered(file: file, keys: changed.count))
            return nil
        }
    }

    /// Reports a problem unless the last reading found it already.
    ///
    /// - Parameter key: what the problem is listed by: its file (a file skipped whole), or the problem's text.
    func skip(_ problem: Problem, previous: Problems, key: String? = nil) -> Problem {
        if previous[key ?? problem.file] != problem { report(.skipped(problem)) }
        return problem
    }
}
