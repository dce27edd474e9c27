// SPDX-License-Identifier: Apache-2.0

import Foundation
import Glibc
import Synchronization

/// The page the browser is handed instead of the editor's address: a file only the user can read, which
/// forwards to `http://127.0.0.1:PORT/login?token=…`. The token so never appears in a process's arguments or
/// environment (`/proc/PID/cmdline`, `/proc/PID/environ`), which every user of the machine can read.
///
/// The file is `settings-editor-PID-open.html`, mode 0600, in `$XDG_RUNTIME_DIR/settings-editor/` (or, without
/// `XDG_RUNTIME_DIR`, `~/.local/share/settings-editor/runtime/`), a folder of the user's with mode 0700; it is
/// removed when the editor ends.
enum OpenPage {
    /// Why the page could not be written.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The page written, until it is removed.
    private static let written = Mutex<String?>(nil)

    /// The folder of the page: `$XDG_RUNTIME_DIR/settings-editor`, else `~/.local/share/settings-editor/runtime`.
    static func folder(environment: [String: String] = ProcessInfo.processInfo.environment) throws(Failure) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            return runtime + "/settings-editor"
        }
        guard let home = environment["HOME"], home.hasPrefix("/") else {
            throw Failure(description: "neither XDG_RUNTIME_DIR nor HOME names a folder")
        }
        return home + "/.local/share/settings-editor/runtime"
    }

    /// Writes the page that forwards to `address`, and returns its `file://` URL.
    static func write(forwardingTo address: String) throws(Failure) -> String {
        let folder = try folder()
        try makePrivateFolder(folder)
        let path = "\(folder)/settings-editor-\(getpid())-open.html"
        // A page left by an editor of the same pid that was killed: its token is dead, the file is replaced.
        if unlink(path) != 0 && errno != ENOENT { throw failure("cannot replace \(path)") }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failure("cannot create \(path)") }
        defer { close(descriptor) }
        guard fchmod(descriptor, 0o600) == 0 else { throw failure("cannot make \(path) yours alone") }
        written.withLock { $0 = path }
        let bytes = Array(html(forwardingTo: address).utf8)
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw failure("cannot write \(path)") }
            offset += count
        }
        return URL(fileURLWithPath: path).absoluteString
    }

    /// Removes the page, if one was written.
    static func remove() {
        if let path = written.withLock({ path in defer { path = nil }; return path }) {
            unlink(path)
        }
    }

    /// The page: it forwards at once (a `refresh`, which needs no script), and links to the address too.
    static func html(forwardingTo address: String) -> String {
        let address = Page.escaped(address)
        return """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="referrer" content="no-referrer">
            <meta http-equiv="refresh" content="0;url=\(address)">
            <title>Settings editor</title>
            </head>
            <body>
            <p>Opening the settings editor. If it does not open, follow <a href="\(address)">this link</a>.</p>
            <p>This file lets you into the editor once; it is yours alone, and it is removed when the editor ends.</p>
            </body>
            </html>

            """
    }

    /// Makes `path` (and its parents) and checks that it is a folder of this user's that no one else may
    /// enter: a folder that is not (another user's, a symbolic link) is refused; one of this user's with
    /// looser permissions is given 0700.
    static func makePrivateFolder(_ path: String) throws(Failure) {
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Failure(description: "cannot make the folder \(path): \(error.localizedDescription)")
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw failure("cannot read \(path)") }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid() else {
            throw Failure(description: "\(path) is not a folder of yours: refused for the page that holds the token")
        }
        if info.st_mode & 0o077 != 0 {
            guard chmod(path, 0o700) == 0 else { throw failure("cannot make \(path) yours alone") }
        }
    }

    private static func failure(_ what: String) -> Failure {
        Failure(description: "\(what): \(String(cString: strerror(errno)))")
    }
}
