// SPDX-License-Identifier: Apache-2.0

package import DBus
import Glibc

/// The view of the user's values the broker publishes for apps to read without the bus (decision 0037): the
/// names of its files and the messages they hold, for the broker that writes them and the clients that read
/// them. (The GIO module, in C, reads the same.)
///
/// - `d-HASH`, one per directory: a `Directory` signal (``Directory``), or, for a directory too large to hold,
///   an `Unpublished` signal `(t serial, s directory)`;
/// - `complete`, once every directory has its file: a `Complete` signal (``Complete``).
package enum View1 {
    package static let interface: InterfaceName = "io.github.settingsbus.View1"
    package static let objectPath: ObjectPath = "/io/github/settingsbus/View1"
    /// The largest file of the view read.
    package static let fileLimit = 16 << 20

    /// The 64-bit FNV-1a hash of a text, in 16 hex digits.
    package static func hash(_ text: some StringProtocol) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The name of a directory's file: `d-` and the hash of its path.
    package static func fileName(of directory: some StringProtocol) -> String { "d-" + hash(directory) }

    /// What a directory's file holds: `(t serial, s directory, a{sv} user, a{sv} administrator, as locks,
    /// a{sv} registered, as secret)`.
    package struct Directory: Sendable, Equatable {
        /// The serial the values hold at.
        package var serial: UInt64
        /// The directory's path.
        package var directory: String
        /// Its own keys' user values, as the broker serves them.
        package var user: [String: DBusValue] = [:]
        /// The administrator's defaults of its keys.
        package var administrator: [String: DBusValue] = [:]
        /// The administrator's locks under it (what `Locks` answers).
        package var locks: [String] = []
        /// The defaults of its keys' registered schemas.
        package var registered: [String: DBusValue] = [:]
        /// Its secret keys, named with no value: a reader asks the bus for them.
        package var secret: [String] = []

        package init(serial: UInt64, directory: String) {
            self.serial = serial
            self.directory = directory
        }

        /// Whether it holds nothing: the directory then has no file.
        package var isEmpty: Bool {
            user.isEmpty && administrator.isEmpty && locks.isEmpty && registered.isEmpty && secret.isEmpty
        }

        /// What a key reads: the user's value, else the administrator's default, else its registered schema's.
        package func value(of key: String) -> DBusValue? { user[key] ?? administrator[key] ?? registered[key] }

        /// Reads a `Directory` message; nil for any other.
        package init?(_ message: DBusMessage) {
            let body = message.body
            guard message.member?.rawValue == "Directory", body.count == 7, case .uint64(let serial) = body[0],
                case .string(let directory) = body[1], let user = Settings1.ValueMap(body[2]),
                let administrator = Settings1.ValueMap(body[3]), let locks = Self.strings(body[4]),
                let registered = Settings1.ValueMap(body[5]), let secret = Self.strings(body[6])
            else { return nil }
            (self.serial, self.directory, self.locks, self.secret) = (serial, directory, locks, secret)
            (self.user, self.administrator, self.registered) = (user.dictionary, administrator.dictionary, registered.dictionary)
        }

        /// The message of its file.
        package var message: DBusMessage {
            DBusMessage.signal(
                path: objectPath, interface: interface, member: "Directory",
                body: [
                    .uint64(serial), .string(directory), Settings1.ValueMap(user).dbusValue,
                    Settings1.ValueMap(administrator).dbusValue, .array(.string, locks.map { .string($0) }),
                    Settings1.ValueMap(registered).dbusValue, .array(.string, secret.map { .string($0) }),
                ])
        }

        private static func strings(_ value: DBusValue) -> [String]? {
            guard case .array(.string, let values) = value else { return nil }
            return values.compactMap { if case .string(let text) = $0 { text } else { nil } }
        }
    }

    /// The file of a directory too large for the view: apps read it from the bus.
    package static func unpublished(serial: UInt64, directory: String) -> DBusMessage {
        DBusMessage.signal(
            path: objectPath, interface: interface, member: "Unpublished", body: [.uint64(serial), .string(directory)])
    }

    /// The directory a `Directory` or `Unpublished` message is of.
    package static func directory(of message: DBusMessage) -> String? {
        guard ["Directory", "Unpublished"].contains(message.member?.rawValue), message.body.count >= 2,
            case .string(let directory) = message.body[1]
        else { return nil }
        return directory
    }

    /// `complete`: `(t serial, s store, s bus, s socket)`, the bus the broker serves named by the GUID
    /// authentication gives (`DBusConnection.serverID`), and by the identity of its socket file, `device:inode`
    /// (`DBusConnection.serverSocket`; empty when it has none), which an app that has not connected yet finds
    /// from its bus's address.
    package struct Complete: Sendable, Equatable {
        package var serial: UInt64
        package var store: String
        package var bus: String
        package var socket: String

        package init(serial: UInt64, store: String, bus: String, socket: String) {
            (self.serial, self.store, self.bus, self.socket) = (serial, store, bus, socket)
        }

        /// Reads a `Complete` message; nil for any other.
        package init?(_ message: DBusMessage) {
            guard message.member?.rawValue == "Complete", message.signature.text == "tsss",
                case .uint64(let serial) = message.body[0], case .string(let store) = message.body[1],
                case .string(let bus) = message.body[2], case .string(let socket) = message.body[3]
            else { return nil }
            self.init(serial: serial, store: store, bus: bus, socket: socket)
        }

        package var message: DBusMessage {
            DBusMessage.signal(
                path: objectPath, interface: interface, member: "Complete",
                body: [.uint64(serial), .string(store), .string(bus), .string(socket)])
        }
    }

    /// A file's identity: a file renamed into place is another inode, and a change of it another change time.
    package struct FileIdentity: Sendable, Equatable {
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

        /// The identity of the file at `path` (not followed if a link); nil when there is none (`errno` says why).
        package init?(path: String) {
            var status = stat()
            guard lstat(path, &status) == 0 else { return nil }
            self.init(status)
        }
    }

    /// The message of a file of the view, with the identity of the file read: a regular file of this user's, not
    /// a link, of at most ``fileLimit`` bytes, holding one whole D-Bus signal of the view's interface (libdbus
    /// checks every offset and length); nil for anything else.
    package static func read(_ path: String) -> (message: DBusMessage, identity: FileIdentity)? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_uid == getuid(),
            status.st_size <= fileLimit, status.st_size >= 16
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
            message.interface == interface
        else { return nil }
        return (message, FileIdentity(status))
    }
}
