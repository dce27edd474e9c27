// SPDX-License-Identifier: Apache-2.0

import Glibc

/// The file operations the store needs to replace and keep files safely: what is at a path, moving a file
/// (with its SQLite companions `-wal` and `-shm`) aside under a dated name, and making a rename durable.
package enum StoreFiles {
    /// What a path names.
    enum Kind: Equatable {
        /// Nothing: the path does not exist.
        case missing
        /// A regular file (a symbolic link is followed) of this many bytes.
        case file(size: Int64)
        /// Something that is not a regular file: a directory, a FIFO, a socket, a device.
        case other(String)
        /// The path cannot be examined (`stat` failed with something other than ENOENT).
        case inaccessible(String)
    }

    /// What `path` names. The corresponding C function is `stat`.
    static func kind(of path: String) -> Kind {
        var info = stat()
        guard stat(path, &info) == 0 else {
            let code = errno
            if code == ENOENT { return .missing }
            if code == ENOTDIR { return .other("path whose parent is not a directory") }
            return .inaccessible(String(cString: strerror(code)))
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return .file(size: Int64(info.st_size))
        case S_IFDIR: return .other("directory")
        case S_IFIFO: return .other("FIFO")
        case S_IFSOCK: return .other("socket")
        case S_IFCHR, S_IFBLK: return .other("device")
        default: return .other("special file")
        }
    }

    /// Whether something (a file, a directory, a dangling link) exists at `path`. The C function is `lstat`.
    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The UTC time stamp used in the names of files moved aside, such as `20261122T101500Z`.
    static func timestamp(_ secondsSince1970: Double = now()) -> String {
        var time = time_t(secondsSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        func digits(_ number: Int32, _ width: Int) -> String {
            let text = String(number)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return digits(parts.tm_year + 1900, 4) + digits(parts.tm_mon + 1, 2) + digits(parts.tm_mday, 2) + "T"
            + digits(parts.tm_hour, 2) + digits(parts.tm_min, 2) + digits(parts.tm_sec, 2) + "Z"
    }

    /// Moves `path` and its `-wal` and `-shm` companions aside, to `<path>.<label>-<UTC time>` (with `-2`,
    /// `-3`… added if that name is taken) and the same name plus `-wal` and `-shm`, so the three still open
    /// together with `sqlite3`.
    ///
    /// - Returns: the new name of `path`.
    /// - Throws: ``Failure`` when `path` cannot be renamed (its companions are moved only after it).
    static func moveAside(_ path: String, label: String) throws(Failure) -> String {
        let base = "\(path).\(label)-\(timestamp())"
        var target = base
        var attempt = 1
        while exists(target) || exists(target + "-wal") {
            attempt += 1
            target = "\(base)-\(attempt)"
        }
        try rename(path, to: target)
        for suffix in ["-wal", "-shm"] where exists(path + suffix) {
            try rename(path + suffix, to: target + suffix)
        }
        syncDirectory(of: path)
        return target
    }

    /// Renames a file. The corresponding C function is `rename`.
    static func rename(_ source: String, to target: String) throws(Failure) {
        guard Glibc.rename(source, target) == 0 else {
            throw Failure("cannot rename \(source) to \(target): \(String(cString: strerror(errno)))")
        }
    }

    /// Removes a file if it exists; a failure is ignored (the next write of that name fails instead).
    static func removeIfPresent(_ path: String) {
        unlink(path)
    }

    /// Flushes a file's data to the disk. The corresponding C function is `fsync`.
    static func sync(_ path: String) throws(Failure) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure("cannot open \(path) to sync it: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw Failure("cannot sync \(path): \(String(cString: strerror(errno)))") }
    }

    /// Flushes the directory that holds `path`, so that a rename in it survives a machine crash.
    static func syncDirectory(of path: String) {
        let fd = open(directory(of: path), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// Creates `path` as a file of `bytes` zero bytes, synced, with the permissions and owner of `reference`,
    /// when nothing is at `path`; best effort. Any part written is removed when it fails (no room, no access).
    ///
    /// The store uses it for SQLite's write-ahead log (see ``StorePersistence/logBytes``): a log whose header
    /// is zero holds no frames, and SQLite writes its header and frames over the zeros. An existing file is
    /// never touched (`O_EXCL`): it may hold commits still to be replayed.
    ///
    /// - Returns: whether the file was made.
    @discardableResult
    static func preallocate(_ path: String, bytes: Int, like reference: String) -> Bool {
        var info = stat()
        guard stat(reference, &info) == 0 else { return false }
        let mode = info.st_mode & 0o777
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { return false }
        // As SQLite makes its own companions: the umask does not narrow them, and root keeps the owner.
        var made = fchmod(fd, mode) == 0 && (geteuid() != 0 || fchown(fd, info.st_uid, info.st_gid) == 0)
        let zeros = [UInt8](repeating: 0, count: 64 * 1024)
        var written = 0
        while made && written < bytes {
            let count = min(zeros.count, bytes - written)
            made = zeros.withUnsafeBytes { writeAll(fd, UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            written += count
        }
        made = made && fdatasync(fd) == 0
        close(fd)
        guard made else {
            unlink(path)
            return false
        }
        syncDirectory(of: path)
        return true
    }

    /// Copies a file's bytes to a new file (replacing it), then, unless told not to, syncs the copy.
    static func copy(_ source: String, to target: String, sync: Bool = true) throws(Failure) {
        func failure(_ what: String) -> Failure {
            Failure("cannot copy \(source) to \(target): \(what): \(String(cString: strerror(errno)))")
        }
        removeIfPresent(target)
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw failure("cannot open the source") }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0 else { throw failure("cannot examine the source") }
        let output = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, info.st_mode & 0o777)
        guard output >= 0 else { throw failure("cannot create the copy") }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count == 0 { break }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure("cannot read")
            }
            guard buffer.withUnsafeBytes({ writeAll(output, UnsafeRawBufferPointer(rebasing: $0[..<count])) }) else {
                throw failure("cannot write")
            }
        }
        if sync, fsync(output) != 0 { throw failure("cannot sync the copy") }
    }

    /// Writes all of `bytes` to `fd`, again after a partial write or an interrupted call; false (with
    /// `errno` set) when a write fails.
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }

    /// The directory part of a path (`/a/b` for `/a/b/c`, `/` for `/a`, `.` for a bare name).
    package static func directory(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        let parent = trimmed[..<slash]
        return parent.isEmpty ? "/" : String(parent)
    }

    /// Creates the store's own folder, readable by its owner only (`0700`), if it is missing.
    ///
    /// Only that folder is made: a missing parent (a home folder that is not there, a mount that is not
    /// mounted) is an error, not something to create.
    static func makeStoreDirectory(_ path: String) throws(Failure) {
        if case .other("directory") = kind(of: path) { return }
        let parent = directory(of: path)
        if parent != path, parent != ".", case .missing = kind(of: parent) {
            throw Failure(
                "cannot create \(path): its parent \(parent) does not exist (the broker makes only the store's own "
                    + "folder)")
        }
        guard mkdir(path, 0o700) == 0 || errno == EEXIST else {
            throw Failure("cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Takes the group's and others' permissions off the store's files that have them and that this process
    /// owns: the store, its `-wal` and `-shm`, its backup and its lock file. The store holds the values of
    /// keys registered as secret; a store made by an older broker, or copied in, may be readable by others.
    static func makePrivate(store path: String) {
        for file in [path, path + "-wal", path + "-shm", path + ".backup", path + ".lock"] {
            var info = stat()
            guard lstat(file, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(),
                info.st_mode & 0o077 != 0
            else { continue }
            chmod(file, info.st_mode & 0o700)
        }
    }

    /// A file's device and inode: what tells the same file from another one put at its path.
    struct Identity: Equatable, Sendable {
        var device: UInt64
        var inode: UInt64

        /// The identity of the file at `path`, nil when there is none.
        init?(of path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// Removes an empty directory; a failure is ignored.
    static func removeDirectory(_ path: String) {
        rmdir(path)
    }

    /// The modification time of a file, in seconds since 1970, if it exists.
    static func modificationTime(_ path: String) -> Double? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
    }

    /// The wall-clock time now, in seconds since 1970. The C function is `clock_gettime(CLOCK_REALTIME)`.
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Creates a private temporary directory. The corresponding C function is `mkdtemp`.
    static func makeTemporaryDirectory() throws(Failure) -> String {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/settings-broker-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw Failure("cannot create a temporary directory: \(String(cString: strerror(errno)))")
        }
        return String(cString: made)
    }

    /// A file operation that failed, with a message that names the file and the reason.
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
