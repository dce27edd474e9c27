// SPDX-License-Identifier: Apache-2.0

// Design note: the view the broker publishes (decision 0037).
//
// Apps read the user's settings from files the broker keeps in a folder of the user's alone
// (`$XDG_RUNTIME_DIR/settingsbus/view`, mode 0700), so that a read needs no bus message and no running broker:
//
// - one file per directory that holds something an app reads: its keys' user values as the broker serves them,
//   the administrator's defaults of its keys, and the administrator's locks under it (what `ReadTreeLayers`
//   gives for the directory's own keys, and `Locks`), the defaults of its keys' registered schemas, and the
//   serial they hold at. A secret key is named, with no value (a reader asks the bus for it), and the user value
//   of a key the administrator locked is left out (the broker does not serve it);
// - each file is one D-Bus message in the wire format (a `Directory` signal of `io.github.settingsbus.View1`:
//   its contract, shared with the clients, is `View1` in SettingsModel),
//   so that every reader checks it with the D-Bus parser it already trusts (libdbus's, GLib's), which bounds
//   every offset and length; its name is `d-` and the FNV-1a hash of the directory, in hex, and the directory
//   is in it, so a reader checks that the file is the one it asked for;
// - a file is written whole beside its place and renamed over it: a reader sees the old file or the new, never
//   a part; a directory left empty has its file removed;
// - `complete` is written once every directory has its file (a message with the serial, the store's path and the
//   GUID of the bus the broker serves): until then, when it is missing, and for an app on another bus (another
//   GUID), a reader asks the bus.
//
// A commit writes the files of the directories it touched, before its writers are answered and its `Changed`
// leaves (``WritePath``): an app that has seen a `Changed`, or had its own write answered, reads the new value.
// The cost of a commit is that of its directories, not of the store. An administrator's change rewrites every
// directory (it is rare, and a lock may cover a whole tree). At start-up, the broker writes the whole view
// again in the background, then `complete`.

import CSandbox
import DBus
import Glibc
import SettingsModel
import Synchronization

/// The view of the user's values the broker publishes for apps (see the design note above).
final class PublishedView: Sendable {
    /// The folder of the view.
    let folder: String
    /// Held while files are written, so that the files of one directory are written in the order of the states
    /// read; true once a file could not be written (the view is then not complete until the broker starts again).
    private let writing = Mutex<Bool>(false)
    /// Told once when a file cannot be written.
    private let report: @Sendable (String) -> Void

    /// Why the view's folder cannot be used.
    struct Unusable: Error, CustomStringConvertible {
        var description: String
    }

    /// Makes the folder (and its parent, for the default `$XDG_RUNTIME_DIR/settingsbus/view`), mode 0700, and
    /// checks that it is a folder of this user's alone; a `complete` left from before is removed first.
    init(folder: String, report: @escaping @Sendable (String) -> Void = { _ in }) throws(Unusable) {
        self.folder = folder
        self.report = report
        let parent = String(folder[..<(folder.lastIndex(of: "/") ?? folder.startIndex)])
        if !parent.isEmpty, access(parent, F_OK) != 0 { mkdir(parent, 0o700) }
        if mkdir(folder, 0o700) != 0, errno != EEXIST {
            throw Unusable(description: "cannot make the view's folder \(folder): \(String(cString: strerror(errno)))")
        }
        var status = stat()
        guard lstat(folder, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw Unusable(description: "the view's folder \(folder) is not a folder")
        }
        guard status.st_uid == getuid() else {
            throw Unusable(description: "the view's folder \(folder) belongs to another user")
        }
        if status.st_mode & 0o077 != 0, chmod(folder, 0o700) != 0 {
            throw Unusable(description: "the view's folder \(folder) is open to other users and cannot be closed")
        }
        // In memory, as $XDG_RUNTIME_DIR is: on a disk, each file renamed into place waits for its blocks to be
        // written (ext4 measured here: 232 µs a file, against 15 µs on tmpfs), and the view is only a cache.
        guard [Self.tmpfsMagic, Self.ramfsMagic].contains(Int64(settingsbus_file_system_type(folder))) else {
            throw Unusable(
                description: "the view's folder \(folder) is not in memory (tmpfs, as $XDG_RUNTIME_DIR is): each "
                    + "commit would wait for the disk")
        }
        unlink(folder + "/complete")
    }

    /// The most children (keys and subdirectories) a directory of the view holds: a larger one is marked
    /// `Unpublished`, and apps read it from the bus, so that a commit's cost stays bounded whatever one directory
    /// holds (a sync that pulled 200,000 keys of one directory in pages rewrote its whole file at each page).
    static let directoryLimit = 4_096

    /// The file systems that keep files in memory (`statfs`'s `f_type`).
    static let tmpfsMagic: Int64 = 0x0102_1994
    static let ramfsMagic: Int64 = 0x8584_58f6

    /// Writes the files of `directories` from the store's state now.
    func publish(_ directories: some Sequence<SettingDirectory>, from store: DurableStore) {
        writing.withLock { failed in
            for directory in directories { write(store.viewOfDirectory(directory), failed: &failed) }
        }
    }

    /// Writes every directory's file again, in pieces of 64 directories (other commits go on between them),
    /// removes the files of directories that hold nothing now, then writes `complete`, which names the bus the
    /// broker serves by its GUID and its socket file (`bus`): an app on another bus does not read this view.
    func publishAll(from store: DurableStore, bus: (id: String, socket: String)) {
        let directories = store.directoriesForView()
        let names = Set(directories.map { View1.fileName(of: $0.rawValue) })
        var start = directories.startIndex
        while start < directories.endIndex {
            let end = min(start + 64, directories.endIndex)
            publish(directories[start..<end], from: store)
            start = end
        }
        writing.withLock { failed in
            for name in BoundedFile.names(in: folder) where name.hasPrefix("d-") && !names.contains(name) {
                // A directory emptied before this pass began: its file is stale unless a commit rewrote it since,
                // and a commit that did would have found it holding something.
                let path = folder + "/" + name
                if let directory = View1.read(path).flatMap({ View1.directory(of: $0.message) }),
                    let known = try? SettingDirectory(directory), store.viewOfDirectory(known).hasFile
                {
                    continue
                }
                unlink(path)
            }
            guard !failed else { return }
            let complete = View1.Complete(
                serial: store.serial, store: store.persistence.path, bus: bus.id, socket: bus.socket)
            if !writeFile(named: "complete", complete.message) { fail(&failed, "complete") }
        }
    }

    /// Writes one directory's file, or removes it when the directory holds nothing. Under `writing`.
    private func write(_ view: DirectoryView, failed: inout Bool) {
        let name = View1.fileName(of: view.directory)
        let message: DBusMessage
        switch view {
        case .held(let held) where held.isEmpty:
            if unlink(folder + "/" + name) != 0, errno != ENOENT { fail(&failed, name) }
            return
        case .held(let held): message = held.message
        case .tooLarge(let serial, let directory): message = View1.unpublished(serial: serial, directory: directory)
        }
        if !writeFile(named: name, message) { fail(&failed, name) }
    }

    /// A file could not be written (a full tmpfs, say): `complete` is removed, so that apps read from the bus
    /// rather than a file that is no longer true, and the failure is reported once. Under `writing`.
    private func fail(_ failed: inout Bool, _ name: String) {
        let error = String(cString: strerror(errno))
        unlink(folder + "/complete")
        guard !failed else { return }
        failed = true
        report("cannot write \(folder)/\(name) (\(error)): apps read the settings from the bus until the broker starts again")
    }

    /// Writes a message to `name` in the folder: whole, beside it, then renamed over it. False when it could not.
    private func writeFile(named name: String, _ message: DBusMessage) -> Bool {
        guard let bytes = try? message.marshalled() else { return false }
        let (path, temporary) = (folder + "/" + name, folder + "/." + name + ".new")
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { return false }
        let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        guard written == bytes.count, rename(temporary, path) == 0 else {
            unlink(temporary)
            return false
        }
        return true
    }
}

/// What the view holds of one directory: its file's content (``View1/Directory``), or, when it has more than
/// ``PublishedView/directoryLimit`` children, only that it is too large.
enum DirectoryView: Sendable, Equatable {
    case held(View1.Directory)
    case tooLarge(serial: UInt64, directory: String)

    var directory: String {
        switch self {
        case .held(let held): held.directory
        case .tooLarge(_, let directory): directory
        }
    }

    /// Whether the directory has a file.
    var hasFile: Bool {
        if case .held(let held) = self { !held.isEmpty } else { true }
    }
}

extension DurableStore {
    /// What the view holds of `directory` now: its own keys only (not those of its subdirectories), none secret.
    func viewOfDirectory(_ directory: SettingDirectory) -> DirectoryView {
        committed.withLock { state in
            var view = View1.Directory(serial: state.serial, directory: directory.rawValue)
            let more = state.forEachChild(of: directory, after: nil, limit: PublishedView.directoryLimit) { name in
                guard !name.hasSuffix("/") else { return }
                let key = SettingPath(unchecked: directory.rawValue + name)
                let user = state.userValue(key), schema = state.schemas[key]
                if let schema, schema.isSecret {
                    view.secret.append(key.rawValue)
                    return
                }
                if let registered = schema?.defaultValue { view.registered[key.rawValue] = registered }
                guard let user else { return }
                if let value = state.effectiveValue(user, schema, key: key),
                    state.source(of: key, user: user, schema: schema, effective: value) == .user
                {
                    view.user[key.rawValue] = value
                }
            }
            guard more == nil else { return .tooLarge(serial: state.serial, directory: directory.rawValue) }
            let administrator = state.administrator
            if !administrator.isEmpty {
                for (key, entry) in administrator.defaults where key.parent == directory {
                    let schema = state.schemas[key]
                    guard schema?.isSecret != true,
                        let value = SettingsRules.administratorDefault(entry.value, under: schema)
                    else { continue }
                    view.administrator[key.rawValue] = value
                }
                view.locks = administrator.locks(under: directory).map(\.rawValue)
            }
            return .held(view)
        }
    }

    /// Every directory the view has a file of: those of the keys with a user value or a registered schema, and,
    /// with an administrator's layer, those of its defaults and those under a lock.
    func directoriesForView() -> [SettingDirectory] {
        committed.withLock { state in
            var directories: Set<SettingDirectory> = []
            for order in [state.values.order, state.schemas.order] {
                var previous: Substring = ""
                for key in order {
                    // Keys in order: the keys of one directory come together.
                    let parent = key[...key.lastIndex(of: "/")!]
                    if parent != previous {
                        previous = parent
                        directories.insert(SettingDirectory(unchecked: String(parent)))
                    }
                }
            }
            for key in state.administrator.defaults.keys { directories.insert(key.parent) }
            for location in state.administrator.locks.keys {
                switch location {
                case .key(let key): directories.insert(key.parent)
                case .directory(let directory):
                    directories.insert(directory)
                    for key in state.values.order where key.hasPrefix(directory.rawValue) {
                        directories.insert(SettingPath(unchecked: key).parent)
                    }
                }
            }
            return directories.sorted { $0.rawValue < $1.rawValue }
        }
    }
}
