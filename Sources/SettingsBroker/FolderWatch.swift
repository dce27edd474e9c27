// SPDX-License-Identifier: Apache-2.0

import DBus
import Dispatch
import Glibc

/// Follows folders with inotify, and calls a handler on its queue 100 ms after the last of a burst of events
/// (a package manager writes many files at once): files written, moved in or out, made or removed, and the
/// folders themselves made, moved or removed.
///
/// ``watch(_:)`` may be called again with the same folders: a folder made or replaced since is followed
/// from then on (inotify follows a folder's inode, not its name), which is how a folder that did not exist,
/// or that was replaced by a new one, is picked up.
final class FolderWatch: Sendable {
    private let queue: DispatchQueue
    private let state = Locked(State())

    private struct State {
        var changed: (@Sendable () -> Void)?
        var folders: [String] = []
        /// What the folders held at the last look, when they are looked at instead of followed.
        var lastLook: [String]?
        var polling = false
        var descriptor: Int32 = -1
        var source: (any DispatchSourceRead)?
        var pending = false
        var stopped = false
    }

    private static let mask = UInt32(
        IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF)

    /// Whether the folders are looked at once a second even when inotify can be had (folders on a network
    /// file system, whose changes made by other machines inotify does not see).
    private let alwaysLook: Bool

    /// - Parameters:
    ///   - queue: the serial queue the handler runs on, and on which ``watch(_:changed:)`` is called.
    ///   - alwaysLook: look at the folders once a second instead of following them with inotify.
    init(queue: DispatchQueue, alwaysLook: Bool = false) {
        self.queue = queue
        self.alwaysLook = alwaysLook
    }

    /// Follows each folder of `folders` that exists now (and goes on following those followed before), and
    /// calls `changed` once after each burst of events in any of them from now on.
    ///
    /// - Returns: how many of them are followed.
    @discardableResult
    func watch(_ folders: [String], changed: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            state.changed = changed
            state.folders = folders
        }
        guard !alwaysLook, let descriptor = open() else {
            startLooking()
            return 0
        }
        return folders.filter { inotify_add_watch(descriptor, $0, Self.mask) >= 0 }.count
    }

    /// Whether the folders are looked at once a second because inotify could not be had.
    var isPolling: Bool { state.withLock { $0.polling } }

    /// Looks at the folders once a second, calling the handler when what they hold changed.
    private func startLooking() {
        let start = state.withLock { state -> Bool in
            guard !state.polling, !state.stopped else { return false }
            state.polling = true
            state.lastLook = Self.look(at: state.folders)
            return true
        }
        if start { scheduleLook() }
    }

    private func scheduleLook() {
        queue.asyncAfter(deadline: .now() + .seconds(1)) { [weak self] in
            guard let self else { return }
            let (folders, last, stopped) = state.withLock { ($0.folders, $0.lastLook, $0.stopped) }
            guard !stopped else { return }
            let now = Self.look(at: folders)
            if now != last {
                let changed = state.withLock { state in
                    state.lastLook = now
                    return state.changed
                }
                changed?()
            }
            scheduleLook()
        }
    }

    /// One line per file of the folders: its path, inode, size and change time.
    private static func look(at folders: [String]) -> [String] {
        var lines: [String] = []
        for folder in folders {
            guard let directory = opendir(folder) else { continue }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                guard name != ".", name != ".." else { continue }
                var info = stat()
                guard stat(folder + "/" + name, &info) == 0 else { continue }
                lines.append(
                    "\(folder)/\(name) \(info.st_ino) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) "
                        + "\(info.st_ctim.tv_sec).\(info.st_ctim.tv_nsec)")
            }
        }
        return lines.sorted()
    }

    /// Stops following; the handler is not called afterwards.
    func stop() {
        let (source, descriptor) = state.withLock { state in
            state.stopped = true
            defer {
                state.source = nil
                state.descriptor = -1
            }
            return (state.source, state.descriptor)
        }
        source?.cancel()
        if source == nil, descriptor >= 0 { close(descriptor) }
    }

    /// The inotify descriptor, made with its read source the first time; nil once stopped or when inotify
    /// is not available.
    private func open() -> Int32? {
        let existing = state.withLock { state -> Int32? in
            state.stopped ? -1 : (state.descriptor >= 0 ? state.descriptor : nil)
        }
        if let existing { return existing >= 0 ? existing : nil }
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else { return nil }
        let source = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        source.setEventHandler { [weak self] in self?.drain(descriptor) }
        source.setCancelHandler { close(descriptor) }
        let started = state.withLock { state -> Bool in
            guard !state.stopped, state.descriptor < 0 else { return false }
            state.descriptor = descriptor
            state.source = source
            return true
        }
        guard started else {
            close(descriptor)
            return state.withLock { $0.descriptor >= 0 ? $0.descriptor : nil }
        }
        source.resume()
        return descriptor
    }

    /// Reads the pending events and schedules one call of the handler 100 ms later. Runs on the queue.
    private func drain(_ descriptor: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while buffer.withUnsafeMutableBytes({ read(descriptor, $0.baseAddress, $0.count) }) > 0 {}
        let schedule = state.withLock { state -> Bool in
            guard !state.pending, !state.stopped else { return false }
            state.pending = true
            return true
        }
        guard schedule else { return }
        queue.asyncAfter(deadline: .now() + .milliseconds(100)) {
            let changed = self.state.withLock { state in
                state.pending = false
                return state.stopped ? nil : state.changed
            }
            changed?()
        }
    }
}
