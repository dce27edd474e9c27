// SPDX-License-Identifier: Apache-2.0

import CSandbox
import Glibc
import SettingsModel
import Synchronization

// Design note: who calls (decision 0033).
//
// A caller is the host or a sandboxed app, and the broker decides which from what the bus daemon and the kernel
// prove, never from what the caller says:
//
// 1. the bus daemon's credentials of the caller's unique name give its process id (`GetConnectionCredentials`,
//    asked once per name before its first call is dispatched: ``DBus/DBusInterface/identifiesCallers``);
// 2. a pidfd is opened for that pid, so that the process read from is the one the pidfd names;
// 3. the process's start time must not be after the moment the broker saw the name appear on the bus
//    (`NameOwnerChanged`): a process started later holds a pid reused after the caller's own process ended (a
//    client that connects, forks and exits leaves its connection to a child, and its pid to whoever comes next);
// 4. a process whose pid namespace and root are the broker's is the host (an `xdg-dbus-proxy` outside any
//    sandbox too, as xdg-desktop-portal treats it); any other "looks sandboxed", and must prove which app it is:
//    `/.flatpak-info` in its root, opened without following a link and required to be a regular file, with an
//    `[Application]` group whose `name` is the app id (a `[Runtime]` is refused);
// 5. the pidfd is asked again after the reading, and the start time read again: a process that ended meanwhile
//    is refused, since its pid may name another process by now (without pidfds, the start time alone).
//
// What cannot be proved is refused (`AccessDenied`, with why), never taken for the host. The answer is kept per
// unique name (unique names are never reused on a bus) and forgotten when the name leaves the bus.

/// Who a caller is, as proved.
enum PeerIdentity: Sendable, Hashable {
    /// A process outside any sandbox: every key, as the bus policy and the broker's other rules allow.
    case host
    /// A sandboxed app: its own subtree and the shared keys (``AppConfinement``).
    case app(AppConfinement)
    /// A caller that looks sandboxed but could not be identified, or whose process could not be proved: every
    /// call is refused, with why.
    case unproved(String)
}

/// The unique names seen on the bus, and who each caller is.
final class PeerIdentities: Sendable {
    private struct State {
        /// When each unique name appeared on the bus, in clock ticks since boot (`CLOCK_BOOTTIME`, as
        /// `/proc/PID/stat` counts a process's start).
        var appeared: [String: UInt64] = [:]
        /// Who each caller identified is.
        var identities: [String: PeerIdentity] = [:]
        /// The sandboxed callers of the sandboxed apps' name, which its signals go to one by one.
        var listeners: [String: AppConfinement] = [:]
        /// When the broker started following names: the bound for a name that appeared before.
        var followingSince: UInt64 = 0
    }

    /// The most names kept; when full, the oldest half of what is known is forgotten (a name that left without
    /// the broker seeing it, were `NameOwnerChanged` refused).
    static let limit = 16_384

    private let state = Mutex(State())
    /// Proves a process: by default from `/proc` (``ProcessProof``); tests of the rules give their own.
    private let prove: @Sendable (_ pid: UInt32, _ appearedBy: UInt64) -> PeerIdentity

    init(prove: @escaping @Sendable (_ pid: UInt32, _ appearedBy: UInt64) -> PeerIdentity = ProcessProof.identify) {
        self.prove = prove
        state.withLock { $0.followingSince = ProcessProof.bootTicks() }
    }

    /// A unique name appeared on the bus (`NameOwnerChanged` with no old owner): noted with the time.
    func appeared(_ name: String) {
        guard name.hasPrefix(":") else { return }
        let now = ProcessProof.bootTicks()
        state.withLock { state in
            if state.appeared.count >= Self.limit { state.appeared.removeAll() }
            state.appeared[name] = now
        }
    }

    /// A unique name left the bus: everything known of it is forgotten.
    func left(_ name: String) {
        guard name.hasPrefix(":") else { return }
        state.withLock { state in
            state.appeared[name] = nil
            state.identities[name] = nil
            state.listeners[name] = nil
        }
    }

    /// Who the caller `name`, whose process the bus daemon says is `pid`, is: proved at its first call, then
    /// kept. A caller whose process id the bus does not tell cannot be proved, and is refused.
    func identity(of name: String, pid: UInt32?) -> PeerIdentity {
        if let known = state.withLock({ $0.identities[name] }) { return known }
        let identity: PeerIdentity
        if let pid {
            // A name that appeared before the broker followed names is bounded by when it started following.
            let appearedBy = state.withLock { $0.appeared[name] ?? ProcessProof.bootTicks() }
            identity = prove(pid, min(appearedBy, ProcessProof.bootTicks()))
        } else {
            identity = .unproved("the bus daemon does not say which process the caller is")
        }
        state.withLock { state in
            if state.identities.count >= Self.limit { state.identities.removeAll() }
            state.identities[name] = identity
        }
        return identity
    }

    /// Notes a sandboxed caller of the sandboxed apps' name, which then gets the changes it may read.
    func listen(_ name: String, as app: AppConfinement) {
        state.withLock { state in
            if state.listeners.count >= Self.limit { state.listeners.removeAll() }
            state.listeners[name] = app
        }
    }

    /// The sandboxed callers that get signals one by one, with their app.
    var listeners: [(name: String, app: AppConfinement)] {
        state.withLock { $0.listeners.map { ($0.key, $0.value) } }
    }
}

/// `O_PATH`, which Glibc's module does not bring to Swift: a descriptor that only names a folder.
private let openPath: Int32 = 0o10000000

/// Proves who a process is, from the kernel (see the design note above).
enum ProcessProof {
    /// The largest `/.flatpak-info` read.
    static let maximumInfoSize = 64 * 1024

    /// Clock ticks since boot, in the unit of `/proc/PID/stat`'s start time.
    static func bootTicks() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_BOOTTIME, &now)
        let hertz = UInt64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        return UInt64(now.tv_sec) * hertz + UInt64(now.tv_nsec) * hertz / 1_000_000_000
    }

    /// Who the process `pid` is, given that its connection appeared on the bus by `appearedBy` (clock ticks since
    /// boot).
    @Sendable static func identify(pid: UInt32, appearedBy: UInt64) -> PeerIdentity {
        // Where the kernel or a sandbox around the broker gives no pidfd (before Linux 5.3, a seccomp filter,
        // valgrind), the start time read again after the reading is what pins the process.
        let pidfd = settingsbus_pidfd_open(Int32(bitPattern: pid))
        guard pidfd >= 0 || pidfd == -ENOSYS || pidfd == -EPERM else {
            return .unproved("its process \(pid) has ended (\(String(cString: strerror(-pidfd))))")
        }
        defer { if pidfd >= 0 { close(pidfd) } }
        guard let started = startTime(of: pid) else {
            return .unproved("the start of its process \(pid) cannot be read")
        }
        guard started <= appearedBy else {
            return .unproved(
                "its process \(pid) started after the caller connected: the pid was reused by another process")
        }
        let identity = look(at: pid)
        // The reading counts only if it was of the process the pidfd names: one that ended meanwhile may have left
        // its pid to another, and one that started again has another start time.
        let ended = pidfd >= 0 && settingsbus_pidfd_alive(pidfd) == 0
        guard !ended, startTime(of: pid) == started else {
            return .unproved("its process \(pid) ended while it was being identified")
        }
        return identity
    }

    /// The host when the process shares the broker's pid namespace and root; else the app its `/.flatpak-info`
    /// proves.
    private static func look(at pid: UInt32) -> PeerIdentity {
        guard let ownNamespace = identity(of: "/proc/self/ns/pid"), let ownRoot = identity(of: "/proc/self/root") else {
            return .unproved("the broker cannot read its own pid namespace and root")
        }
        let namespace = identity(of: "/proc/\(pid)/ns/pid")
        let root = identity(of: "/proc/\(pid)/root")
        if namespace == ownNamespace, root == ownRoot { return .host }
        guard namespace != nil, root != nil else {
            return .unproved("the pid namespace and root of its process \(pid) cannot be read")
        }
        let text: String
        switch readInfo(of: pid) {
        case .success(let read): text = read
        case .failure(let problem): return .unproved("it looks sandboxed, and \(problem)")
        }
        switch FlatpakInfo.appID(in: text) {
        case .success(let appID):
            switch AppConfinement.make(appID: appID) {
            case .success(let app): return .app(app)
            case .failure(let problem): return .unproved("it looks sandboxed, and \(problem)")
            }
        case .failure(let problem):
            return .unproved("it looks sandboxed, and its /.flatpak-info \(problem)")
        }
    }

    /// The device and inode a path leads to (through `/proc`'s own links); nil when it cannot be read.
    private static func identity(of path: String) -> [UInt64]? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return [UInt64(status.st_dev), UInt64(status.st_ino)]
    }

    /// Why `/.flatpak-info` could not be read.
    struct InfoProblem: Error, CustomStringConvertible {
        var description: String
    }

    /// The text of `/.flatpak-info` in the process's root: opened below the root without following a link,
    /// a regular file of at most ``maximumInfoSize`` bytes.
    private static func readInfo(of pid: UInt32) -> Result<String, InfoProblem> {
        let root = open("/proc/\(pid)/root", openPath | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else {
            return .failure(InfoProblem(description: "its root cannot be opened (\(String(cString: strerror(errno))))"))
        }
        defer { close(root) }
        let file = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard file >= 0 else {
            let reason = errno == ELOOP ? "is a symbolic link" : "cannot be opened (\(String(cString: strerror(errno))))"
            return .failure(InfoProblem(description: "its /.flatpak-info \(reason)"))
        }
        defer { close(file) }
        var status = stat()
        guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            return .failure(InfoProblem(description: "its /.flatpak-info is not a regular file"))
        }
        do {
            return .success(
                try BoundedFile.read(descriptor: file, name: "/.flatpak-info", limit: maximumInfoSize))
        } catch {
            return .failure(InfoProblem(description: "its \(error)"))
        }
    }

    /// A process's start time, in clock ticks since boot (`/proc/PID/stat`, field 22); nil when it cannot be read.
    static func startTime(of pid: UInt32) -> UInt64? {
        let file = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var bytes = [UInt8](repeating: 0, count: 1024)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress!, $0.count) }
        guard count > 0 else { return nil }
        // The command name, field 2, is in parentheses and may hold anything: fields are counted after its last ')'.
        guard let close = bytes[..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        // Field 3 is the first after the name; field 22 is the 20th.
        guard fields.count >= 20 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }
}

/// The `/.flatpak-info` a sandboxed app's root holds (a key file).
enum FlatpakInfo {
    /// Why it proves no app.
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    /// The app id of an `[Application]` group's `name`; a `[Runtime]` (a runtime run on its own), no
    /// `[Application]`, or no name proves no app.
    static func appID(in text: String) -> Result<String, Problem> {
        var group = ""
        var groups: Set<String> = []
        var name: String?
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.drop { $0 == " " || $0 == "\t" }
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                guard let end = line.firstIndex(of: "]") else {
                    return .failure(Problem(description: "has a group header with no ']' on line \(number + 1)"))
                }
                group = String(line[line.index(after: line.startIndex)..<end])
                groups.insert(group)
                continue
            }
            guard group == "Application", let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingCharacters(in: " \t")
            if key == "name" {
                name = String(line[line.index(after: equals)...]).trimmingCharacters(in: " \t\r")
            }
        }
        if groups.contains("Runtime") {
            return .failure(Problem(description: "describes a runtime ([Runtime]), not an app"))
        }
        guard groups.contains("Application") else {
            return .failure(Problem(description: "has no [Application] group"))
        }
        guard let name, !name.isEmpty else {
            return .failure(Problem(description: "has no name in its [Application] group"))
        }
        return .success(name)
    }
}

extension StringProtocol {
    /// The text without the given characters at either end.
    fileprivate func trimmingCharacters(in set: String) -> String {
        let drop: (Character) -> Bool = { set.contains($0) }
        return String(String(self.drop(while: drop)).reversed().drop(while: drop).reversed())
    }
}
