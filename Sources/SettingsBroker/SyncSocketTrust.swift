// SPDX-License-Identifier: Apache-2.0

import Glibc

// Who the broker hands the sync configuration to when it reaches its sync process at a socket
// (`--sync-socket`): the configuration holds the database's URL and the password file's path, and the queue
// holds the synced values, so the broker sends nothing before it knows the listener is its own user's.
//
// Two checks, both before a byte is sent (as OpenSSH checks the files and sockets it trusts):
// - the path: the socket's folder and each of its parents are owned by this user or root and writable by no
//   one else; a folder others can write is taken only when it has the sticky bit (as /tmp) and the entry
//   below it on the path is this user's or root's (the sticky bit keeps others from removing or renaming it);
//   the socket itself is a socket, this user's or root's.
// - the listener: the process that listens on the socket (SO_PEERCRED, its credentials when it called
//   listen) runs as this user or as root.
extension SyncProcess {
    /// Checks the path of the sync process's socket, and returns it with its folder's symbolic links resolved
    /// (the path the broker connects to).
    ///
    /// - Throws: ``Failure`` naming the folder or socket that another user owns or can write.
    static func trustedSocketPath(_ path: String) throws(Failure) -> String {
        let user = geteuid()
        var absolute = path
        if !absolute.hasPrefix("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            guard getcwd(&buffer, buffer.count) != nil else {
                throw Failure("cannot find the sync process's socket \(path): the current folder is unknown")
            }
            absolute = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + path
        }
        let parts = absolute.split(separator: "/", omittingEmptySubsequences: true)
        guard let name = parts.last, name != ".", name != ".." else {
            throw Failure("the sync process's socket \(path) names a folder, not a socket")
        }
        let folderPath = "/" + parts.dropLast().joined(separator: "/")
        guard let resolved = realpath(folderPath, nil) else {
            throw Failure("cannot reach the sync process at \(path): \(String(cString: strerror(errno)))")
        }
        let folder = String(cString: resolved)
        free(resolved)
        let socketPath = (folder == "/" ? "" : folder) + "/" + name

        // From the root down: each folder, with the entry below it on the way to the socket.
        var chain = ["/"]
        for part in folder.split(separator: "/") { chain.append((chain.count == 1 ? "" : chain.last!) + "/" + part) }
        chain.append(socketPath)
        var entries: [stat] = []
        for entry in chain {
            var info = stat()
            guard lstat(entry, &info) == 0 else {
                throw Failure("cannot reach the sync process at \(socketPath): \(entry): \(String(cString: strerror(errno)))")
            }
            entries.append(info)
        }
        for index in chain.indices.dropLast() {
            let info = entries[index]
            guard info.st_uid == user || info.st_uid == 0 else {
                throw Failure(
                    "the folder \(chain[index]) of the sync process's socket \(socketPath) is owned by uid \(info.st_uid), "
                        + "neither this user (uid \(user)) nor root: nothing is sent to a socket another user may have put there")
            }
            guard info.st_mode & 0o022 != 0 else { continue }
            let below = entries[index + 1]
            guard info.st_mode & 0o1000 != 0 else {
                throw Failure(
                    "the folder \(chain[index]) of the sync process's socket \(socketPath) is writable by others "
                        + "(mode \(Self.octal(info.st_mode))): nothing is sent to a socket another user may have put there; "
                        + "give --sync-socket a path in a folder of this user's alone, such as $XDG_RUNTIME_DIR/settingsbus/")
            }
            guard below.st_uid == user || below.st_uid == 0 else {
                throw Failure(
                    "\(chain[index + 1]) is owned by uid \(below.st_uid), neither this user (uid \(user)) nor root, in a "
                        + "folder others can write (\(chain[index]), mode \(Self.octal(info.st_mode))), on the way to the "
                        + "sync process's socket \(socketPath): nothing is sent to a socket another user may have put there")
            }
        }
        let socketInfo = entries[entries.count - 1]
        guard socketInfo.st_mode & 0o170000 == 0o140000 else {
            throw Failure("cannot reach the sync process at \(socketPath): it is not a socket")
        }
        guard socketInfo.st_uid == user || socketInfo.st_uid == 0 else {
            throw Failure(
                "the sync process's socket \(socketPath) is owned by uid \(socketInfo.st_uid), neither this user "
                    + "(uid \(user)) nor root: nothing is sent to it")
        }
        return socketPath
    }

    /// Checks that the process listening on a connected socket runs as this user or as root.
    ///
    /// - Throws: ``Failure`` naming the listener's user.
    static func checkListener(of descriptor: Int32, at path: String) throws(Failure) {
        // struct ucred: pid, uid, gid.
        var credentials: (pid: pid_t, uid: uid_t, gid: gid_t) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
            length == socklen_t(MemoryLayout.size(ofValue: credentials))
        else {
            throw Failure(
                "cannot tell who listens at the sync process's socket \(path): \(String(cString: strerror(errno))); "
                    + "nothing is sent to it")
        }
        let user = geteuid()
        guard credentials.uid == user || credentials.uid == 0 else {
            throw Failure(
                "the process listening at the sync process's socket \(path) (pid \(credentials.pid)) runs as uid "
                    + "\(credentials.uid), neither this user (uid \(user)) nor root: nothing is sent to it")
        }
    }

    /// A mode's permission bits in octal, four digits (`1777`).
    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
