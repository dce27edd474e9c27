// SPDX-License-Identifier: Apache-2.0

import Glibc
import SettingsModel
import Synchronization

/// What the interface needs to confine sandboxed callers.
struct Confinement: Sendable {
    /// Who each caller is.
    let peers: PeerIdentities
    /// The keys every sandboxed app may read.
    let shared: SharedKeys
    /// Whether the interface is served on the sandboxed apps' own name, whose sandboxed callers get the changes
    /// they may read one by one (``SettingsBusNames/sandboxedBusName``).
    var unicastsChanges = false
}

/// What a sandboxed app may reach (decision 0033): its own subtree, named by its app id reversed into a path
/// (`org.example.Editor` → `/org/example/Editor/`), to read, write, register schemas in and reset; and the
/// shared keys (``SharedKeys``) to read. Everything else is `AccessDenied`. A shared key stays read-only even in
/// an app's own subtree: an app whose id names a shared directory (`org.freedesktop.appearance`) writes none of it.
struct AppConfinement: Sendable, Hashable {
    /// The app id, such as `org.example.Editor`.
    let appID: String
    /// Its own subtree, such as `/org/example/Editor/`.
    let subtree: SettingDirectory

    /// The confinement of an app id: at least three elements separated by dots (as Flatpak requires), each a
    /// valid path segment.
    static func make(appID: String) -> Result<AppConfinement, ProcessProof.InfoProblem> {
        // Flatpak's rule for app ids: elements of letters, digits, '_' and '-', none starting with a digit.
        let elements = appID.split(separator: ".", omittingEmptySubsequences: false)
        let valid = elements.allSatisfy { element in
            guard let first = element.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else {
                return false
            }
            return element.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "-")
            }
        }
        guard appID.utf8.count <= 255, elements.count >= 3, valid,
            let subtree = try? SettingDirectory("/" + elements.joined(separator: "/") + "/")
        else {
            return .failure(
                ProcessProof.InfoProblem(
                    description: "its app id '\(appID.prefix(80))' is not a reversed domain name of at least three "
                        + "elements of letters, digits, '_' and '-'"))
        }
        return .success(AppConfinement(appID: appID, subtree: subtree))
    }

    /// Whether the app may write, register or reset `key`: only in its own subtree, and never a shared key.
    func writes(_ key: SettingPath, shared: SharedKeys.List) -> Bool {
        subtree.contains(key) && !shared.contains(key)
    }

    /// Whether the app may read `key`: its own subtree or a shared key.
    func reads(_ key: SettingPath, shared: SharedKeys.List) -> Bool {
        subtree.contains(key) || shared.contains(key)
    }

    /// Whether the app may read the directory `directory` as a whole (`ReadTree`, `List`, `Locks`, `History`):
    /// when it lies in its own subtree or in a shared directory. Above those (`/`, `/org/`) it may not: what
    /// they hold is other apps' business.
    func reads(_ directory: SettingDirectory, shared: SharedKeys.List) -> Bool {
        subtree.contains(directory) || shared.directories.contains { $0.contains(directory) }
    }

    /// Whether the app may write everything a location names: a directory in its own subtree that holds no
    /// shared key and meets no shared directory.
    func writes(_ location: SettingLocation, shared: SharedKeys.List) -> Bool {
        switch location {
        case .key(let key): writes(key, shared: shared)
        case .directory(let directory): subtree.contains(directory) && !shared.meets(directory)
        }
    }

    /// The refusal of something the app may not reach.
    func refusal(_ what: String) -> SettingsError {
        .accessDenied(
            "\(what): the sandboxed app \(appID) reaches only its own keys under \(subtree.rawValue) and reads the "
                + "shared keys the administrator and the user allow (sandbox-shared)")
    }
}

/// The keys every sandboxed app may read: the desktop's appearance, by default, under
/// `/org/freedesktop/appearance/`, its GNOME counterparts and the fonts.
///
/// The administrator's `sandbox-shared` file in the broker's folder (`/etc/settingsbus/sandbox-shared`) replaces the
/// default list; the user's `$XDG_CONFIG_HOME/settingsbus/sandbox-shared` adds to it (a line `/path`) and takes
/// from it (a line `-/path`). A line is a key or a directory (ending with `/`); `#` starts a comment. Both files
/// are read again when they change, at most once a second; a line that is not a path is skipped and reported.
final class SharedKeys: Sendable {
    /// The list in force.
    struct List: Sendable, Hashable {
        var keys: Set<SettingPath> = []
        var directories: [SettingDirectory] = []

        func contains(_ key: SettingPath) -> Bool {
            keys.contains(key) || directories.contains { $0.contains(key) }
        }

        /// Whether a directory holds a shared key, or is in or holds a shared directory.
        func meets(_ directory: SettingDirectory) -> Bool {
            keys.contains { directory.contains($0) }
                || directories.contains { $0.contains(directory) || directory.contains($0) }
        }
    }

    /// The list when the administrator gives none.
    static let defaultEntries = [
        "/org/freedesktop/appearance/",
        "/org/gnome/desktop/interface/color-scheme",
        "/org/gnome/desktop/interface/accent-color",
        "/org/gnome/desktop/interface/gtk-theme",
        "/org/gnome/desktop/interface/icon-theme",
        "/org/gnome/desktop/interface/cursor-theme",
        "/org/gnome/desktop/interface/enable-animations",
        "/org/gnome/desktop/interface/font-name",
        "/org/gnome/desktop/interface/document-font-name",
        "/org/gnome/desktop/interface/monospace-font-name",
        "/org/gnome/desktop/interface/text-scaling-factor",
        "/org/gnome/desktop/a11y/interface/high-contrast",
    ]

    /// The largest file read.
    static let maximumFileSize = 64 * 1024

    private let administratorFile: String?
    private let userFile: String?
    private struct State {
        var list = List()
        var problems: [String] = []
        var checkedAt: Int64 = .min
        var seen: [FileStamp?] = []
    }
    private let state = Mutex(State())

    private struct FileStamp: Hashable {
        var size: Int
        var modified: Int
        var nanoseconds: Int
        var inode: UInt64
    }

    init(administratorFile: String?, userFile: String?) {
        self.administratorFile = administratorFile
        self.userFile = userFile
    }

    /// The list in force, read again if a file changed (looked at most once a second).
    var list: List {
        let now = Self.monotonicSeconds()
        return state.withLock { state in
            if now != state.checkedAt {
                state.checkedAt = now
                let stamps = [administratorFile, userFile].map { $0.flatMap(Self.stamp) }
                if stamps != state.seen || state.seen.isEmpty {
                    state.seen = stamps
                    (state.list, state.problems) = read()
                }
            }
            return state.list
        }
    }

    /// The problems of the last reading, for `Status`: a file and line each.
    var problems: [String] { state.withLock { $0.problems } }

    private func read() -> (List, [String]) {
        var problems: [String] = []
        var entries: [String] = Self.defaultEntries
        if let administratorFile, let text = Self.text(of: administratorFile, &problems) {
            entries = Self.lines(text, administratorFile, &problems).compactMap { $0.hasPrefix("-") ? nil : $0 }
        }
        if let userFile, let text = Self.text(of: userFile, &problems) {
            for line in Self.lines(text, userFile, &problems) {
                if line.hasPrefix("-") {
                    let removed = String(line.dropFirst())
                    entries.removeAll { $0 == removed }
                } else {
                    entries.append(line)
                }
            }
        }
        var list = List()
        for entry in entries {
            if entry.hasSuffix("/") {
                if let directory = try? SettingDirectory(entry) { list.directories.append(directory) }
            } else if let key = try? SettingPath(entry) {
                list.keys.insert(key)
            }
        }
        return (list, problems)
    }

    /// The paths of a file's lines (with a leading `-` kept), each checked: a line that is not a path is
    /// reported and skipped.
    private static func lines(_ text: String, _ file: String, _ problems: inout [String]) -> [String] {
        var result: [String] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw.prefix { $0 != "#" }).trimmingSpace
            if line.isEmpty { continue }
            let path = line.hasPrefix("-") ? String(line.dropFirst()) : line
            if SettingPath.isValidKey(path) || SettingDirectory.isValidDirectory(path) {
                result.append(line)
            } else if problems.count < 20 {
                problems.append("\(file):\(number + 1): '\(path.prefix(80))' is neither a key nor a directory")
            }
        }
        return result
    }

    /// A file's text; nil when it does not exist (silently) or cannot be read (reported).
    private static func text(of path: String, _ problems: inout [String]) -> String? {
        guard access(path, F_OK) == 0 else { return nil }
        do {
            return try BoundedFile.read(path, limit: maximumFileSize)
        } catch {
            problems.append("\(error)")
            return nil
        }
    }

    private static func stamp(_ path: String) -> FileStamp? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return FileStamp(
            size: Int(status.st_size), modified: Int(status.st_mtim.tv_sec), nanoseconds: Int(status.st_mtim.tv_nsec),
            inode: UInt64(status.st_ino))
    }

    private static func monotonicSeconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Int64(now.tv_sec)
    }
}

extension String {
    /// The text without spaces, tabs and carriage returns at either end.
    fileprivate var trimmingSpace: String {
        let space: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        return String(String(drop(while: space).reversed()).drop(while: space).reversed())
    }
}
