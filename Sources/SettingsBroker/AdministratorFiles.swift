// SPDX-License-Identifier: Apache-2.0

// Design note: the administrator's files.
//
// An administrator puts machine-wide defaults and locks in a folder (`/etc/settingsbus/`, or the broker's
// `--admin-dir`): `defaults.d/*.conf` and `locks.d/*` (``AdministratorLayer``). The broker reads them at start,
// before it takes its bus name, and follows the folder, its two subfolders and the folder above it with
// inotify, so a file added, edited or removed, a subfolder replaced, or the whole folder made later, takes
// effect about 100 ms after the last change, for every user of the broker, without a restart.
//
// Each file is read on its own. A file that cannot be read or parsed is skipped: the broker logs it with its
// line, `Status` lists it, and what that file said the last time it was good stays in force (a file broken
// while being edited does not lift a lock). A file that is removed is forgotten.

import DBus
import Dispatch
import FoundationEssentials
import Glibc
import SettingsModel

/// The administrator's folder, read at start and followed while the broker runs.
final class AdministratorFiles: Sendable {
    /// What happened, for the log.
    enum Event: Sendable {
        case loaded(files: Int, defaults: Int, locks: Int)
        case skipped(AdministratorLayer.Problem)
        /// inotify could not be had: the folders are looked at once a second.
        case polling
    }

    /// The folder, such as `/etc/settingsbus`.
    let folder: String
    private let apply: @Sendable (AdministratorLayer) -> Void
    private let report: @Sendable (Event) -> Void
    private let queue = DispatchQueue(label: "settings-administrator-files")
    private let folders: FolderWatch
    private let pollingFolders: Bool
    private let state = Locked(State())

    private struct State {
        /// The last good content of each file, by path.
        var good: [String: AdministratorLayer.FileContent] = [:]
        var problems: [String: AdministratorLayer.Problem] = [:]
        var layer = AdministratorLayer()
    }

    /// The default folder.
    static let defaultFolder = "/etc/settingsbus"

    /// - Parameters:
    ///   - apply: called with the new layer each time it changes (and once at start when it is not empty).
    ///   - report: called with what to log.
    init(
        folder: String, pollingFolders: Bool = false, apply: @escaping @Sendable (AdministratorLayer) -> Void,
        report: @escaping @Sendable (Event) -> Void
    ) {
        self.folder = folder.count > 1 && folder.hasSuffix("/") ? String(folder.dropLast()) : folder
        self.apply = apply
        self.report = report
        folders = FolderWatch(queue: queue, alwaysLook: pollingFolders)
        self.pollingFolders = pollingFolders
    }

    /// Reads the files and follows the folder; returns once the first reading is applied.
    func start() async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            queue.async {
                self.reload()
                if self.folders.isPolling, !self.pollingFolders { self.report(.polling) }
                done.resume()
            }
        }
    }

    /// Stops following the folder.
    func stop() {
        folders.stop()
    }

    /// The layer in force.
    var layer: AdministratorLayer { state.withLock { $0.layer } }

    /// What `Status` reports: `admin-files` (as, the files in force), `admin-problems` (as, one line per file
    /// skipped, with its line and the reason).
    func status() -> [String: DBusValue] {
        state.withLock { state in
            [
                "admin-files": .array(.string, state.good.keys.sorted().map(DBusValue.string)),
                "admin-problems": .array(.string, state.problems.values.map(\.description).sorted().map(DBusValue.string)),
            ]
        }
    }

    // MARK: - Reading

    /// The folders followed: the folder above (for the folder itself being made or replaced), the folder and
    /// its subfolders.
    private var followed: [String] {
        let parent = folder.split(separator: "/").dropLast().joined(separator: "/")
        return ["/" + parent, folder] + [AdministratorLayer.FileKind.defaults, .locks].map { "\(folder)/\($0.rawValue)" }
    }

    /// Follows the folders, then reads every file and applies the layer if it changed. Runs on ``queue``.
    private func reload() {
        folders.watch(followed) { [weak self] in self?.reload() }
        var found: [(path: String, kind: AdministratorLayer.FileKind)] = []
        for kind in [AdministratorLayer.FileKind.defaults, .locks] {
            let directory = "\(folder)/\(kind.rawValue)"
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
                .filter { AdministratorLayer.reads($0, as: kind) }
                .sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            found += names.map { ("\(directory)/\($0)", kind) }
        }
        let previous = state.withLock { $0 }
        var good: [String: AdministratorLayer.FileContent] = [:]
        var problems: [String: AdministratorLayer.Problem] = [:]
        for (path, kind) in found {
            do throws(AdministratorLayer.Problem) {
                good[path] = try Self.read(path, as: kind)
            } catch {
                problems[path] = error
                if let last = previous.good[path] { good[path] = last }
                if previous.problems[path] != error { report(.skipped(error)) }
            }
        }
        // Files in the order they were found: defaults in name order, then locks.
        let layer = AdministratorLayer(files: found.compactMap { good[$0.path] })
        state.withLock { state in
            state.good = good
            state.problems = problems
            state.layer = layer
        }
        if layer != previous.layer {
            report(.loaded(files: good.count, defaults: layer.defaults.count, locks: layer.locks.count))
            apply(layer)
        }
    }

    /// Reads and parses one file.
    static func read(_ path: String, as kind: AdministratorLayer.FileKind) throws(AdministratorLayer.Problem)
        -> AdministratorLayer.FileContent
    {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw AdministratorLayer.Problem(file: path, line: nil, message: "cannot be read: \(error)")
        }
        return try AdministratorLayer.parse(text, as: kind, file: path)
    }
}
