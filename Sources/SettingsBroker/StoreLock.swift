// SPDX-License-Identifier: Apache-2.0

import DBus
import Glibc

/// The lock that makes one broker the only owner of a store, for its whole life.
///
/// It is an exclusive `flock` on `<store>.lock`, beside the store: the kernel releases it when the broker
/// exits, however it exits, and it holds across buses (two login sessions of one user that each start a
/// broker on `~/.config/settingsbus/settings.db` find each other here). The file holds the owner's pid, so the
/// broker that is refused can say which process has the store. A lock is per open file description, so a
/// second store opened on the same path in the same process is refused too.
final class StoreLock: Sendable {
    /// The lock file.
    let path: String
    /// The locked file's descriptor; -1 once released.
    private let descriptor: Locked<Int32>

    /// Why the lock was not taken.
    enum Failure: Error {
        /// Another process holds it: its pid as the lock file says, if it could be read.
        case held(pid: Int32?)
        /// The lock file cannot be opened or locked.
        case unusable(String)
    }

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = Locked(descriptor)
    }

    /// The lock file of a store.
    static func path(of store: String) -> String { store + ".lock" }

    /// Takes the lock of the store at `store` without waiting, and writes this process's pid into it.
    ///
    /// The corresponding C functions are `open` and `flock` (`LOCK_EX | LOCK_NB`).
    static func acquire(store: String) throws(Failure) -> StoreLock {
        let path = path(of: store)
        let descriptor = try lock(path)
        return StoreLock(path: path, descriptor: descriptor)
    }

    private static func lock(_ path: String) throws(Failure) -> Int32 {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else {
            throw .unusable("cannot open the lock file \(path): \(String(cString: strerror(errno)))")
        }
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            if errno == EINTR { continue }
            let reason = errno
            let holder = readPID(descriptor)
            close(descriptor)
            if reason == EWOULDBLOCK { throw .held(pid: holder) }
            throw .unusable("cannot lock \(path): \(String(cString: strerror(reason)))")
        }
        let text = Array("\(getpid())\n".utf8)
        if ftruncate(descriptor, 0) == 0 {
            _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        }
        return descriptor
    }

    private static func readPID(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer.prefix(count), as: UTF8.self).trimmingSpaces
        return Int32(text)
    }

    /// Takes the lock again on a new lock file, after the store's folder and the old file were removed while
    /// the broker held it: the old lock, on a file no longer there, keeps no other broker out.
    func renew() throws(Failure) {
        let fresh = try Self.lock(path)
        let old = descriptor.withLock { descriptor in
            defer { descriptor = fresh }
            return descriptor
        }
        Self.unlockAndClose(old)
    }

    /// Whether the lock file at ``path`` is still the file this broker locked.
    var isInPlace: Bool {
        let descriptor = descriptor.withLock { $0 }
        var held = stat()
        var named = stat()
        guard descriptor >= 0, fstat(descriptor, &held) == 0, stat(path, &named) == 0 else { return false }
        return held.st_dev == named.st_dev && held.st_ino == named.st_ino
    }

    /// Releases the lock (the kernel would at exit).
    ///
    /// It unlocks before closing: a child that another thread is starting at that moment holds a copy of the
    /// descriptor until it executes its program, and closing alone would leave the lock held meanwhile.
    func release() {
        let old = descriptor.withLock { descriptor in
            defer { descriptor = -1 }
            return descriptor
        }
        Self.unlockAndClose(old)
    }

    private static func unlockAndClose(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    deinit {
        release()
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(self.filter { !$0.isWhitespace && $0 != "\0" })
    }
}
