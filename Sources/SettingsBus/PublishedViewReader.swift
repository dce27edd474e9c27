// SPDX-License-Identifier: Apache-2.0

import DBus
import Glibc
import SettingsModel
import Synchronization

/// Reads keys from the view the broker publishes (decision 0037): no bus message, and no broker needed.
///
/// A key is read from its directory's file (one D-Bus message, checked whole by libdbus), kept parsed while the
/// file is the same: one `stat` of the file and one of `complete` a read. A read of keys of several directories
/// (whose files may hold different moments), of a secret key, from a view that is not complete or not of this
/// store's bus, or a file that cannot be trusted, gives nil: the store then asks the bus.
final class PublishedViewReader: Sendable {
    /// The view's folder.
    let folder: String
    /// The GUID of the bus this store's connection reached: the view's `complete` must name it.
    let busID: String

    /// A directory's file as read, with the identity of the file read.
    struct Directory {
        var identity: View1.FileIdentity
        var held: View1.Directory
        var secret: Set<String>
    }

    private struct State {
        /// The directories read, by file name (at most ``cacheLimit``).
        var directories: [String: Directory] = [:]
        /// The `complete` last found to be of this bus, and its serial.
        var complete: (identity: View1.FileIdentity, serial: UInt64)?
    }
    private let state = Mutex(State())

    /// The most directories kept parsed.
    static let cacheLimit = 256

    /// The reader of the view in `folder`, else `$SETTINGSBUS_VIEW`, else `$XDG_RUNTIME_DIR/settingsbus/view`,
    /// for a connection to the bus of GUID `busID`; nil when there is no such folder of this user's that no one
    /// else may enter.
    init?(busID: String?, folder: String? = nil) {
        let given = folder ?? getenv("SETTINGSBUS_VIEW").map { String(cString: $0) }
        let runtime = getenv("XDG_RUNTIME_DIR").map { String(cString: $0) }
        guard let busID, !busID.isEmpty,
            let folder = given?.hasPrefix("/") == true ? given : runtime?.hasPrefix("/") == true ? runtime! + "/settingsbus/view" : nil
        else { return nil }
        var status = stat()
        guard lstat(folder, &status) == 0, status.st_mode & S_IFMT == S_IFDIR, status.st_uid == getuid(),
            status.st_mode & 0o077 == 0
        else { return nil }
        self.folder = folder
        self.busID = busID
    }

    /// The values of `keys`, all of one directory, from the view; nil when the view cannot answer them.
    func read(_ keys: [SettingPath]) -> SettingsSnapshot? {
        guard let first = keys.first else { return nil }
        let directory = first.rawValue[...first.rawValue.lastIndex(of: "/")!]
        guard keys.allSatisfy({ $0.rawValue.count > directory.count && $0.rawValue.hasPrefix(directory)
            && !$0.rawValue.dropFirst(directory.count).contains("/") })
        else { return nil }
        guard let completeSerial = completeSerial() else { return nil }
        let name = View1.fileName(of: directory)
        guard let identity = View1.FileIdentity(path: folder + "/" + name) else {
            // A complete view has no file for a directory that holds nothing.
            return errno == ENOENT ? SettingsSnapshot(values: [:], serial: completeSerial) : nil
        }
        var read = state.withLock { $0.directories[name] }
        if read?.identity != identity {
            guard let fresh = Self.readDirectory(folder + "/" + name, named: String(directory)) else { return nil }
            read = fresh
            state.withLock { state in
                if state.directories.count >= Self.cacheLimit { state.directories.removeAll() }
                state.directories[name] = fresh
            }
        }
        guard let read else { return nil }
        var values: [SettingPath: DBusValue] = [:]
        for key in keys {
            guard !read.secret.contains(key.rawValue) else { return nil }
            values[key] = read.held.value(of: key.rawValue)
        }
        return SettingsSnapshot(values: values, serial: read.held.serial)
    }

    /// Reads `complete` ahead of the first read.
    func prepare() {
        _ = completeSerial()
    }

    /// The serial of `complete` when it is there and names this bus; nil otherwise.
    private func completeSerial() -> UInt64? {
        guard let identity = View1.FileIdentity(path: folder + "/complete") else { return nil }
        if let known = state.withLock({ $0.complete }), known.identity == identity { return known.serial }
        guard let complete = View1.read(folder + "/complete").flatMap({ View1.Complete($0.message) }),
            complete.bus == busID
        else { return nil }
        state.withLock { $0.complete = (identity, complete.serial) }
        return complete.serial
    }

    /// A directory's file, read and checked whole; nil when it is not the view's file of `directory`.
    static func readDirectory(_ path: String, named directory: String) -> Directory? {
        guard let (message, identity) = View1.read(path), let held = View1.Directory(message), held.directory == directory
        else { return nil }
        return Directory(identity: identity, held: held, secret: Set(held.secret))
    }
}

/// The reader of the broker's view for a store's connection: made when the connection opens, with the view's
/// `complete` read then, so that the store's first read of a key finds it ready.
final class ViewReaders: Sendable {
    /// The view's folder, when not the default's (tests).
    private let folder: String?
    /// Whether the store calls the broker's own name: a store that calls the sandboxed apps' name reads no view.
    private let readsTheView: Bool
    private let current = Mutex<(connection: ObjectIdentifier, reader: PublishedViewReader?)?>(nil)

    init(folder: String?, busName: BusName) {
        self.folder = folder
        readsTheView = busName == SettingsBusNames.busName
    }

    /// Makes the reader of a connection that has just opened, and reads the view's `complete`.
    @Sendable func open(_ connection: DBusConnection) {
        reader(for: connection)?.prepare()
    }

    /// The reader for `connection`, made if need be; nil when there is no view for it, or the store calls the
    /// sandboxed apps' name (a sandbox has no view).
    func reader(for connection: DBusConnection) -> PublishedViewReader? {
        guard readsTheView else { return nil }
        let identity = ObjectIdentifier(connection)
        if let known = current.withLock({ $0 }), known.connection == identity { return known.reader }
        let reader = PublishedViewReader(busID: connection.serverID, folder: folder)
        current.withLock { $0 = (identity, reader) }
        return reader
    }
}
