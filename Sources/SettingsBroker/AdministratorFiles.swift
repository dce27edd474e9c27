// SPDX-License-Identifier: Apache-2.0

// Design note: the administrator's files.
//
// An administrator puts machine-wide defaults and locks in a folder (`/etc/settingsbus/`, or the broker's
// `--admin-dir`): `defaults.d/*.conf` and `locks.d/*` (``AdministratorLayer``). The broker reads them at start,
// before it takes its bus name, and follows the folder and its two subfolders with inotify, so a file added,
// edited or removed, a subfolder replaced, or the whole folder made later, takes effect about 100 ms after the
// last change, for every user of the broker, without a restart.
//
// Each file is read on its own, within bounds (``FileBounds``: 1 MiB a file, the first 1,000 files of a
// subfolder, 16 MiB a subfolder; a larger file is refused by name before it is read). A file that cannot be
// read or parsed is skipped: the broker logs it with its line (quoted by a short prefix), `Status` lists it,
// and what that file said the last time it was good stays in force (a file broken while being edited does not
// lift a lock). A file that is removed is forgotten.
//
// Only root and the broker's own user may write the folder: a folder or a folder above it (up to `/`), a
// subfolder or a file that others can write (writable by every user or by a group other than root's, or owned
// by another user; a folder above may be writable by others with the sticky bit, as `/tmp` is) is refused by
// name, in the log and in `Status`, and nothing is read through it (what was read before stays in force). A
// file is checked as it was opened (``FileOwners``), wherever a symbolic link led.
//
// The folder above is followed only for the folder's own name (it being made, removed or replaced): files
// written beside it, in `/etc`, wake nothing (``FolderWatch``).

import DBus
import Dispatch
import Glibc
import SettingsModel

/// The administrator's folder, read at start and followed while the broker runs.
final class AdministratorFiles: Sendable {
    /// What happened, for the log.
    enum Event: Sendable {
        case loaded(files: Int, defaults: Int, locks: Int)
        case skipped(AdministratorLayer.Problem)
        /// The folder was read (after a change in it, or at start): how many files, how many skipped.
        case read(files: Int, problems: Int)
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
    private let owners = FileOwners()
    private let state = Locked(State())

    private typealias FileKind = AdministratorLayer.FileKind

    private struct State {
        /// The files read, in the order of the layer: defaults in name order, then locks.
        var files: [(path: String, kind: FileKind)] = []
        /// The last good content of each file, by path.
        var good: [String: AdministratorLayer.FileContent] = [:]
        /// The problems, by the path of the file or folder.
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
    /// or folder skipped, with its line and the reason: at most ``FileBounds/listedProblems``, then how many
    /// more).
    func status() -> [String: DBusValue] {
        state.withLock { state in
            [
                "admin-files": .array(.string, state.good.keys.sorted().map(DBusValue.string)),
                "admin-problems": .array(
                    .string, FileBounds.listed(state.problems.values.map(\.description)).map(DBusValue.string)),
            ]
        }
    }

    // MARK: - Reading

    private var subfolders: [(path: String, kind: FileKind)] {
        [FileKind.defaults, .locks].map { (path: "\(folder)/\($0.rawValue)", kind: $0) }
    }

    /// Follows the folders, then reads every file and applies the layer if it changed. Runs on ``queue``.
    private func reload() {
        folders.watch(FolderWatch.following([folder] + subfolders.map(\.path))) { [weak self] in self?.reload() }
        let previous = state.withLock { $0 }
        var files: [(path: String, kind: FileKind)] = []
        var good: [String: AdministratorLayer.FileContent] = [:]
        var problems: [String: AdministratorLayer.Problem] = [:]
        /// Keeps what the files of `kind` said when last read.
        func keep(_ kind: FileKind) {
            for file in previous.files where file.kind == kind {
                files.append(file)
                good[file.path] = previous.good[file.path]
            }
        }
        if let unsafe = owners.unsafeFolder(folder, above: true) {
            problems[unsafe.path] = refusal(unsafe.path, unsafe.reason)
            keep(.defaults)
            keep(.locks)
        } else {
            for (directory, kind) in subfolders {
                if let unsafe = owners.unsafeFolder(directory, above: false) {
                    problems[unsafe.path] = refusal(unsafe.path, unsafe.reason)
                    keep(kind)
                    continue
                }
                let contents = BoundedFile.readFolder(
                    directory, accepting: { AdministratorLayer.reads($0, as: kind) }, owners: owners)
                for problem in contents.problems { problems[problem.file] = problem }
                for (path, text) in contents.files {
                    files.append((path, kind))
                    do throws(AdministratorLayer.Problem) {
                        good[path] = try AdministratorLayer.parse(text.get(), as: kind, file: path)
                    } catch {
                        problems[path] = error
                        if let last = previous.good[path] { good[path] = last }
                    }
                }
            }
        }
        files.removeAll { good[$0.path] == nil }
        for (path, problem) in problems.sorted(by: { $0.key < $1.key }) where previous.problems[path] != problem {
            report(.skipped(problem))
        }
        report(.read(files: files.count, problems: problems.count))
        let layer = AdministratorLayer(files: files.compactMap { good[$0.path] })
        state.withLock { state in
            state.files = files
            state.good = good
            state.problems = problems
            state.layer = layer
        }
        if layer != previous.layer {
            report(.loaded(files: good.count, defaults: layer.defaults.count, locks: layer.locks.count))
            apply(layer)
        }
    }

    /// The problem of a folder others can write.
    private func refusal(_ path: String, _ reason: String) -> AdministratorLayer.Problem {
        let what = path == folder || !path.hasPrefix(folder + "/") ? "the administrator's files" : "the files in it"
        return AdministratorLayer.Problem(
            file: path, line: nil,
            message: "refused: \(reason), so users other than root and the broker's own user could change \(what); nothing is read "
                + "through it, and what was read before stays in force")
    }
}
