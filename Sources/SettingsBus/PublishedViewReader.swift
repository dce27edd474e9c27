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

    /// A file's identity: a file renamed into place is another inode, and a change of it another change time.
    struct Identity: Equatable {
        var inode: UInt64
        var size: Int64
        var changedSeconds: Int
        var changedNanoseconds: Int

        init(_ status: stat) {
            inode = UInt64(status.st_ino)
            size = Int64(status.st_size)
            changedSeconds = status.st_ctim.tv_sec
            changedNanoseconds = status.st_ctim.tv_nsec
        }
    }

    /// What a directory's file holds.
    struct Directory {
        var identity: Identity
        var serial: UInt64
        var user: [String: DBusValue]
        var administrator: [String: DBusValue]
        var registered: [String: DBusValue]
        var secret: Set<String>

        /// What a key reads: the user's value, else the administrator's default, else its registered schema's.
        func value(of key: String) -> DBusValue? { user[key] ?? administrator[key] ?? registered[key] }
    }

    private struct State {
        /// The directories read, by file name (at most ``cacheLimit``).
        var directories: [String: Directory] = [:]
        /// The `complete` last found to be of this bus, and its serial.
        var complete: (identity: Identity, serial: UInt64)?
    }
    private let state = Mutex(State())

    /// The most directories kept parsed.
    static let cacheLimit = 256
    /// The largest file read.
    static let fileLimit = 16 << 20

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

    /// The name of a directory's file: `d-` and the 64-bit FNV-1a hash of its path, in 16 hex digits.
    static func fileName(of directory: Substring) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in directory.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        let digits = String(hash, radix: 16)
        return "d-" + String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The values of `keys`, all of one directory, from the view; nil when the view cannot answer them.
    func read(_ keys: [SettingPath]) -> SettingsSnapshot? {
        guard let first = keys.first else { return nil }
        let directory = first.rawValue[...first.rawValue.lastIndex(of: "/")!]
        guard keys.allSatisfy({ $0.rawValue.count > directory.count && $0.rawValue.hasPrefix(directory)
            && !$0.rawValue.dropFirst(directory.count).contains("/") })
        else { return nil }
        guard let completeSerial = completeSerial() else { return nil }
        let name = Self.fileName(of: directory)
        var status = stat()
        guard lstat(folder + "/" + name, &status) == 0 else {
            // A complete view has no file for a directory that holds nothing.
            return errno == ENOENT ? SettingsSnapshot(values: [:], serial: completeSerial) : nil
        }
        let identity = Identity(status)
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
            values[key] = read.value(of: key.rawValue)
        }
        return SettingsSnapshot(values: values, serial: read.serial)
    }

    /// The serial of `complete` when it is there and names this bus; nil otherwise.
    private func completeSerial() -> UInt64? {
        var status = stat()
        guard lstat(folder + "/complete", &status) == 0 else { return nil }
        let identity = Identity(status)
        if let known = state.withLock({ $0.complete }), known.identity == identity { return known.serial }
        guard let (message, _) = Self.message(folder + "/complete"), message.member?.rawValue == "Complete",
            message.signature.text == "tss", case .uint64(let serial) = message.body[0],
            case .string(let bus) = message.body[2], bus == busID
        else { return nil }
        state.withLock { $0.complete = (identity, serial) }
        return serial
    }

    /// A directory's file, read and checked whole; nil when it is not the view's file of `directory`.
    static func readDirectory(_ path: String, named directory: String) -> Directory? {
        guard let (message, identity) = message(path), message.member?.rawValue == "Directory",
            message.signature.text == "tsa{sv}a{sv}asa{sv}as", case .uint64(let serial) = message.body[0],
            case .string(let named) = message.body[1], named == directory, case .array(_, let secret) = message.body[6]
        else { return nil }
        return Directory(
            identity: identity, serial: serial, user: entries(message.body[2]),
            administrator: entries(message.body[3]), registered: entries(message.body[5]),
            secret: Set(secret.compactMap { if case .string(let key) = $0 { key } else { nil } }))
    }

    /// The view's message in the file at `path`, and the identity of the file read.
    private static func message(_ path: String) -> (DBusMessage, Identity)? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            close(descriptor)
            return nil
        }
        return message(descriptor, status).map { ($0, Identity(status)) }
    }

    /// The view's message in an open file (closed here): a regular file of this user's, at most ``fileLimit``,
    /// one whole D-Bus signal of the view's interface.
    private static func message(_ descriptor: Int32, _ status: stat) -> DBusMessage? {
        defer { close(descriptor) }
        guard status.st_mode & S_IFMT == S_IFREG, status.st_uid == getuid(), status.st_size <= fileLimit,
            status.st_size >= 16
        else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(status.st_size))
        var done = 0
        while done < bytes.count {
            let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress! + done, $0.count - done) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            done += count
        }
        guard done == bytes.count, let message = try? DBusMessage(marshalled: bytes), message.kind == .signal,
            message.interface?.rawValue == "io.github.settingsbus.View1"
        else { return nil }
        return message
    }

    private static func entries(_ value: DBusValue) -> [String: DBusValue] {
        guard case .dictionary(_, _, let entries) = value else { return [:] }
        var result: [String: DBusValue] = [:]
        for entry in entries {
            if case .string(let key) = entry.key, case .variant(let inner) = entry.value { result[key] = inner }
        }
        return result
    }
}
