// SPDX-License-Identifier: Apache-2.0

import DBus
import Dispatch
import Glibc
import SettingsModel

/// Follows folders with inotify, and calls a handler on its queue 100 ms after the last of a burst of events
/// (a package manager writes many files at once): files written, moved in or out, made or removed, their
/// owner or mode changed, and the folders themselves made, moved or removed.
///
/// A folder is followed whole (``Followed/names`` nil), or only for some names in it: the folder above a
/// followed one, or the nearest existing folder above one that does not exist yet, is followed only for the
/// making, removal or renaming of the next folder down (``following(_:)``), so that files written beside it
/// (in `/etc`, above `/etc/settingsbus`) wake nothing.
///
/// ``watch(_:changed:)`` is called again, with ``following(_:)`` worked out again, after each change: a
/// folder made or replaced since is followed from then on (inotify follows a folder's inode, not its name),
/// and the folders no longer needed are no longer followed.
final class FolderWatch: Sendable {
    /// A folder followed: all of it, or only some names in it.
    struct Followed: Hashable, Sendable {
        var path: String
        /// The names whose making, removal or renaming is a change; nil for every change in the folder.
        var names: Set<String>?
    }

    private let queue: DispatchQueue
    private let state = Locked(State())

    private struct State {
        var changed: (@Sendable () -> Void)?
        var folders: [Followed] = []
        /// What is followed, by inotify watch descriptor: nil for everything in the folder, else the names.
        var rules: [Int32: Set<String>?] = [:]
        /// What the folders held at the last look, when they are looked at instead of followed.
        var lastLook: [String]?
        var polling = false
        var descriptor: Int32 = -1
        var source: (any DispatchSourceRead)?
        var pending = false
        var stopped = false
    }

    /// The events of a folder followed whole.
    private static let wholeMask = UInt32(
        IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF
            | IN_ATTRIB)
    /// The events of a folder followed for some names: entries made, removed or renamed (no file written).
    private static let namesMask = UInt32(
        IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

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

    /// What to follow for `folders`: each that exists whole, and the folder above it for its own name (it
    /// being removed or replaced); for each that does not, the nearest folder above it that exists, for the
    /// name of the next folder down (it being made).
    static func following(_ folders: [String]) -> [Followed] {
        var whole: [String] = []
        var names: [String: Set<String>] = [:]
        var order: [String] = []
        func add(_ parent: String, _ name: String) {
            if names[parent] == nil { order.append(parent) }
            names[parent, default: []].insert(name)
        }
        for folder in folders {
            guard folder.hasPrefix("/") else {
                if Self.isFolder(folder) { whole.append(folder) }
                continue
            }
            var parts = folder.split(separator: "/").map(String.init)
            var path = "/" + parts.joined(separator: "/")
            if Self.isFolder(path) {
                whole.append(path)
                if let last = parts.popLast() { add("/" + parts.joined(separator: "/"), last) }
                continue
            }
            while let last = parts.popLast() {
                path = "/" + parts.joined(separator: "/")
                if Self.isFolder(path) {
                    add(path, last)
                    break
                }
            }
        }
        var seen = Set<String>()
        return whole.filter { seen.insert($0).inserted }.map { Followed(path: $0, names: nil) }
            + order.filter { !seen.contains($0) }.map { Followed(path: $0, names: names[$0]) }
    }

    private static func isFolder(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && UInt32(info.st_mode) & 0o170000 == 0o040000
    }

    /// Follows `folders` (and no longer the folders followed before but not given now), and calls `changed`
    /// once after each burst of events in any of them from now on.
    ///
    /// - Returns: how many of them are followed.
    @discardableResult
    func watch(_ folders: [Followed], changed: @escaping @Sendable () -> Void) -> Int {
        state.withLock { state in
            state.changed = changed
            state.folders = folders
        }
        guard !alwaysLook, let descriptor = open() else {
            startLooking()
            return 0
        }
        var rules: [Int32: Set<String>?] = [:]
        for folder in folders {
            var watch = inotify_add_watch(descriptor, folder.path, folder.names == nil ? Self.wholeMask : Self.namesMask)
            guard watch >= 0 else { continue }
            if let known = rules[watch] {
                // The same folder by two paths: follow what either asks.
                let merged: Set<String>? = (known == nil || folder.names == nil) ? nil : known!.union(folder.names!)
                watch = inotify_add_watch(descriptor, folder.path, merged == nil ? Self.wholeMask : Self.namesMask)
                rules[watch] = .some(merged)
            } else {
                rules[watch] = .some(folder.names)
            }
        }
        let old = state.withLock { state in
            defer { state.rules = rules }
            return state.rules
        }
        for watch in old.keys where rules[watch] == nil { inotify_rm_watch(descriptor, watch) }
        return rules.count
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

    /// One line per file of the folders (of those named, for a folder followed for some names): its path,
    /// inode, size, mode, owner and change time.
    private static func look(at folders: [Followed]) -> [String] {
        var lines: [String] = []
        for folder in folders {
            guard let directory = opendir(folder.path) else { continue }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let name = BoundedFile.entryName(UnsafeRawPointer(entry))
                guard name != ".", name != "..", folder.names?.contains(name) ?? true else { continue }
                var info = stat()
                guard stat(folder.path + "/" + name, &info) == 0 else { continue }
                lines.append(
                    "\(folder.path)/\(name) \(info.st_ino) \(info.st_size) \(info.st_mode) \(info.st_uid) "
                        + "\(info.st_gid) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) "
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

    /// Reads the pending events and, when one of them is a change of what is followed, schedules one call of
    /// the handler 100 ms later. Runs on the queue.
    private func drain(_ descriptor: Int32) {
        let rules = state.withLock { $0.rules }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var relevant = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            buffer.withUnsafeBytes { raw in
                // struct inotify_event: wd (Int32), mask, cookie, len (UInt32), then len bytes of name.
                var offset = 0
                while offset + 16 <= count {
                    let watch = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameBytes = raw[(offset + 16)..<min(count, offset + 16 + length)]
                    offset += 16 + length
                    if relevant { continue }
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                        relevant = true
                        continue
                    }
                    guard let rule = rules[watch] else { continue }
                    guard let names = rule, length > 0 else {
                        // The whole folder is followed, or the event is of the folder itself.
                        relevant = true
                        continue
                    }
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    if names.contains(name) { relevant = true }
                }
            }
        }
        guard relevant else { return }
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
