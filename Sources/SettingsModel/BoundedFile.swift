// SPDX-License-Identifier: Apache-2.0

// Design note: the files a broker reads from folders are a boundary.
//
// The administrator's files and schema files are read by every user's broker, so they are read within bounds:
// at most ``FileBounds/maximumFiles`` files of a folder (the first in name order), each of at most
// ``FileBounds/maximumFileSize`` bytes, and at most ``FileBounds/maximumFolderSize`` bytes from one folder. A
// file is opened first and its size taken from the descriptor (`fstat`): a larger one is refused by name, with
// nothing read; a file that grows while being read is read up to the bound and refused. A file that is not a
// regular file (a FIFO, a device) is refused without waiting on it. A problem quotes at most
// ``FileBounds/quotedCharacters`` characters of a line, and a problem's whole text is at most
// ``FileBounds/maximumMessage`` characters; `Status` lists at most ``FileBounds/listedProblems`` of them.
//
// Where who may write matters (the administrator's folder), ``FileOwners`` checks that only root or the
// reading user can write a folder, the folders above it, and each file as opened (its descriptor, wherever a
// symbolic link led): owned by one of them, and not writable by a group other than root's nor by every user.
// A folder above may be writable by every user when it has the sticky bit (`/tmp`): others cannot rename or
// remove what is not theirs in it.

import Glibc

/// The bounds on what a broker reads from the files of a folder, and on the problems it reports of them.
package enum FileBounds {
    /// The largest file read: 1 MiB.
    package static let maximumFileSize = 1 << 20
    /// The most files read from one folder: the first in name order.
    package static let maximumFiles = 1000
    /// The most bytes read from the files of one folder: 16 MiB.
    package static let maximumFolderSize = 16 << 20
    /// The most characters of a line quoted in a problem.
    package static let quotedCharacters = 100
    /// The most characters of a problem's text.
    package static let maximumMessage = 400
    /// The most problems of one kind `Status` lists.
    package static let listedProblems = 20

    /// What `Status` lists of `problems`: the first ``listedProblems`` in order, then a line saying how many
    /// more there are.
    package static func listed(_ problems: some Collection<String>) -> [String] {
        let sorted = problems.sorted()
        guard sorted.count > listedProblems else { return sorted }
        let more = sorted.count - listedProblems
        return Array(sorted.prefix(listedProblems)) + ["… and \(more) more problem\(more == 1 ? "" : "s")"]
    }
}

extension LineText {
    /// A line as a problem quotes it: at most ``FileBounds/quotedCharacters`` characters, then `…` when it is
    /// longer; control characters (such as NUL, which no D-Bus string may hold) shown as `�`.
    package static func excerpt(_ text: some StringProtocol, limit: Int = FileBounds.quotedCharacters) -> String {
        var result = ""
        var count = 0
        for character in text {
            if count == limit {
                result += "…"
                break
            }
            let control = character != "\t" && character.unicodeScalars.contains { $0.properties.generalCategory == .control }
            result.append(control ? "\u{FFFD}" : character)
            count += 1
        }
        return result
    }
}

/// Who may write the files a broker reads: root and the reading process's user.
package struct FileOwners: Sendable {
    /// The reading process's effective user.
    package let user: UInt32

    package init(user: UInt32 = geteuid()) {
        self.user = user
    }

    /// Why users other than root and ``user`` can write what `info` describes; nil when they cannot.
    ///
    /// - Parameter above: whether it is a folder above the one read: such a folder may be writable by others
    ///   when it has the sticky bit.
    func whyOthersCanWrite(_ info: stat, above: Bool = false) -> String? {
        whyOthersCanWrite(mode: UInt32(info.st_mode), owner: info.st_uid, group: info.st_gid, above: above)
    }

    /// Why users other than root and ``user`` can write a file or folder of this mode, owner and group; nil
    /// when they cannot.
    ///
    /// - Parameter above: whether it is a folder above the one read: such a folder may be writable by others
    ///   when it has the sticky bit.
    package func whyOthersCanWrite(mode: UInt32, owner: UInt32, group: UInt32, above: Bool = false) -> String? {
        let octal = "0" + String(mode & 0o7777, radix: 8)
        if owner != 0, owner != user {
            return "owned by uid \(owner), not by root" + (user == 0 ? "" : " nor by uid \(user), the broker's user")
        }
        let sticky = above && mode & 0o1000 != 0
        if mode & 0o002 != 0, !sticky { return "writable by every user (mode \(octal))" }
        if mode & 0o020 != 0, group != 0, !sticky { return "writable by group \(group) (mode \(octal))" }
        return nil
    }

    /// The first of `folder` and (with `above`) the folders above it (as written, and as resolved through
    /// symbolic links) that users other than root and ``user`` can write, and why; nil when there is none or
    /// `folder` does not exist.
    package func unsafeFolder(_ folder: String, above: Bool) -> (path: String, reason: String)? {
        var info = stat()
        guard stat(folder, &info) == 0 else { return nil }
        if let reason = whyOthersCanWrite(info) { return (folder, reason) }
        guard above else { return nil }
        var chains = [Self.ancestors(of: folder)]
        if let resolved = realpath(folder, nil) {
            let path = String(cString: resolved)
            free(resolved)
            if path != folder {
                if stat(path, &info) == 0, let reason = whyOthersCanWrite(info) { return (path, reason) }
                chains.append(Self.ancestors(of: path))
            }
        }
        for path in chains.joined() {
            guard stat(path, &info) == 0 else { continue }
            if let reason = whyOthersCanWrite(info, above: true) { return (path, reason) }
        }
        return nil
    }

    /// The folders above an absolute path, nearest first, up to `/`; none for a relative path.
    static func ancestors(of path: String) -> [String] {
        guard path.hasPrefix("/") else { return [] }
        var parts = path.split(separator: "/")
        var result: [String] = []
        while !parts.isEmpty {
            parts.removeLast()
            result.append("/" + parts.joined(separator: "/"))
        }
        return result
    }
}

/// Files read within ``FileBounds``.
package enum BoundedFile {
    /// Reads a regular file of at most `limit` bytes as UTF-8 text.
    ///
    /// - Parameters:
    ///   - limit: the most bytes read of it.
    ///   - folderLeft: what is left of ``FileBounds/maximumFolderSize`` for the files of its folder, when
    ///     that is less than `limit` (for the problem's text).
    ///   - owners: when given, the file as opened must be writable only by them.
    ///   - regularOnly: whether anything but a regular file (a FIFO, a device) is refused without being read;
    ///     when false, at most `limit` bytes of it are read.
    /// - Throws: a ``FileProblem`` naming the file and why it is not read.
    package static func read(
        _ path: String, limit: Int = FileBounds.maximumFileSize, folderLeft: Int = .max, owners: FileOwners? = nil,
        regularOnly: Bool = true
    ) throws(FileProblem) -> String {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
        guard descriptor >= 0 else {
            throw FileProblem(file: path, line: nil, message: "cannot be read: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw FileProblem(file: path, line: nil, message: "cannot be read: \(String(cString: strerror(errno)))")
        }
        guard UInt32(info.st_mode) & 0o170000 == 0o100000 || !regularOnly else {
            throw FileProblem(file: path, line: nil, message: "is not a regular file; it is not read")
        }
        if let owners, let reason = owners.whyOthersCanWrite(info) {
            throw FileProblem(file: path, line: nil, message: "refused: \(reason); it is not read")
        }
        let bound = min(limit, folderLeft)
        guard Int(info.st_size) <= bound else { throw tooLarge(path, size: Int(info.st_size), limit, folderLeft) }
        return try read(descriptor: descriptor, name: path, limit: bound, folderLeft: folderLeft)
    }

    /// Reads at most `limit` bytes of an open descriptor (such as standard input) as UTF-8 text.
    ///
    /// - Throws: a ``FileProblem`` naming `name` when there are more bytes, or they are not UTF-8 text.
    package static func read(
        descriptor: Int32, name: String, limit: Int = FileBounds.maximumFileSize, folderLeft: Int = .max
    ) throws(FileProblem) -> String {
        var bytes = [UInt8](repeating: 0, count: limit + 1)
        var total = 0
        while total < bytes.count {
            let count = bytes.withUnsafeMutableBytes { raw in
                Glibc.read(descriptor, raw.baseAddress! + total, raw.count - total)
            }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                // A descriptor that would block (standard input from a terminal or a pipe): wait for it.
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&poller, 1, -1)
                continue
            }
            guard count >= 0 else {
                throw FileProblem(file: name, line: nil, message: "cannot be read: \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            total += count
        }
        guard total <= limit else { throw tooLarge(name, size: nil, limit, folderLeft) }
        guard let text = String(validating: bytes[..<total], as: UTF8.self) else {
            throw FileProblem(file: name, line: nil, message: "is not UTF-8 text; it is not read")
        }
        return text
    }

    private static func tooLarge(_ path: String, size: Int?, _ limit: Int, _ folderLeft: Int) -> FileProblem {
        let what = size.map { "is \($0) bytes" } ?? "is longer than \(min(limit, folderLeft)) bytes"
        if folderLeft < limit, (size ?? .max) <= limit {
            return FileProblem(
                file: path, line: nil,
                message: "\(what), more than the \(folderLeft) bytes left of the \(FileBounds.maximumFolderSize) "
                    + "bytes (16 MiB) read from one folder; it is not read")
        }
        return FileProblem(
            file: path, line: nil,
            message: "\(what), more than the \(limit) bytes (1 MiB) read of one file; it is not read")
    }

    /// What was read of a folder.
    package struct FolderContents: Sendable {
        /// Each file read or refused, in name order (bytes).
        package var files: [(path: String, text: Result<String, FileProblem>)] = []
        /// A problem with the folder as a whole (too many files).
        package var problems: [FileProblem] = []
    }

    /// Reads the files of a folder whose names `accepts` takes, within ``FileBounds``: the first
    /// ``FileBounds/maximumFiles`` in name order (bytes), each of at most ``FileBounds/maximumFileSize`` bytes,
    /// and together at most ``FileBounds/maximumFolderSize`` bytes.
    ///
    /// - Parameter owners: when given, each file as opened must be writable only by them.
    package static func readFolder(
        _ folder: String, accepting accepts: (String) -> Bool, owners: FileOwners? = nil
    ) -> FolderContents {
        var contents = FolderContents()
        let names = self.names(in: folder).filter(accepts)
        if names.count > FileBounds.maximumFiles {
            contents.problems.append(
                FileProblem(
                    file: folder, line: nil,
                    message: "holds \(names.count) files; only the first \(FileBounds.maximumFiles) by name are read"))
        }
        var left = FileBounds.maximumFolderSize
        for name in names.prefix(FileBounds.maximumFiles) {
            let path = folder + "/" + name
            do throws(FileProblem) {
                let text = try read(path, folderLeft: left, owners: owners)
                left -= text.utf8.count
                contents.files.append((path, .success(text)))
            } catch {
                contents.files.append((path, .failure(error)))
            }
        }
        return contents
    }

    /// The names in a folder, but `.` and `..`, in byte order; none when it cannot be listed.
    package static func names(in folder: String) -> [String] {
        guard let directory = opendir(folder) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = entryName(UnsafeRawPointer(entry))
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    /// The name of an entry `readdir` returned, read up to its NUL in place. Copying `d_name` (or the whole
    /// `dirent`) would read 256 bytes, past the end of a short entry that ends the buffer `readdir` filled,
    /// which can be the end of mapped memory.
    /// `entry` is the `dirent` pointer.
    package static func entryName(_ entry: UnsafeRawPointer) -> String {
        let offset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        let name = entry.advanced(by: offset).assumingMemoryBound(to: CChar.self)
        return String(decoding: UnsafeRawBufferPointer(start: name, count: strlen(name)), as: UTF8.self)
    }
}
