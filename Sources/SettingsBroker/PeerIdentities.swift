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
//    client that connects, forks and exits leaves its connection to a child, and its pid to whoever comes next).
//    A name that appeared before the broker followed names (after a restart, or the caller that started it) is
//    bounded by the moment the following took effect, never by the moment of its call, and its process must hold
//    a connection to the bus now and have held, when the following took effect, as many as the names that claim
//    it (``noteCensus(claims:)``); a name the broker could not keep (its tables are bounded) is refused;
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
        /// When the broker's following of names took effect: every name that appeared before is bounded by it;
        /// nil until then.
        var followingSince: UInt64?
        /// The first and the latest unique name seen appearing: a name between them that is not in
        /// ``appeared`` appeared while the broker followed, and its appearance could not be kept.
        var firstSeen: UniqueName?
        var latestSeen: UniqueName?
        /// The bus daemon's process, whose sockets are the other ends of every connection to the bus.
        var busDaemon: UInt32?
        /// For each process that names on the bus claimed when the following took effect: whether it then held
        /// as many connections to the bus as names claimed it (``noteCensus(claims:)``); nil until counted.
        var census: [UInt32: Bool]?
    }

    /// The most names kept in each table: above the bus daemon's own bound on connections (a session bus allows
    /// 100,000 by default). A name that cannot be kept is never forgotten for another: the caller whose
    /// appearance or identity cannot be kept is refused, and an entry leaves only when its name leaves the bus.
    static let defaultLimit = 131_072
    /// The most names kept in each table (``defaultLimit``; smaller in tests of the rule).
    let limit: Int

    private let state = Mutex(State())
    /// Proves a process: by default from `/proc` (``ProcessProof``); tests of the rules give their own.
    private let prove: @Sendable (_ pid: UInt32, _ appearedBy: UInt64) -> PeerIdentity
    /// Whether a process holds one of the bus daemon's connections (``ProcessProof/holdsConnection(_:of:)``).
    private let holdsConnection: @Sendable (_ pid: UInt32, _ busDaemon: UInt32) -> Bool?
    /// How many of the bus daemon's connections each process holds (``ProcessProof/connections(of:busDaemon:)``).
    private let countConnections: @Sendable (_ pids: Set<UInt32>, _ busDaemon: UInt32) -> [UInt32: Int]?

    init(
        limit: Int = defaultLimit,
        prove: @escaping @Sendable (_ pid: UInt32, _ appearedBy: UInt64) -> PeerIdentity = ProcessProof.identify,
        holdsConnection: @escaping @Sendable (_ pid: UInt32, _ busDaemon: UInt32) -> Bool? = ProcessProof.holdsConnection,
        countConnections: @escaping @Sendable (_ pids: Set<UInt32>, _ busDaemon: UInt32) -> [UInt32: Int]? =
            ProcessProof.connections
    ) {
        self.limit = limit
        self.prove = prove
        self.holdsConnection = holdsConnection
        self.countConnections = countConnections
    }

    /// The broker's following of names has taken effect (its match rule for `NameOwnerChanged` is in force):
    /// every unique name that appears from now on is noted by ``appeared(_:)``.
    func startedFollowing() {
        let now = ProcessProof.bootTicks()
        state.withLock { $0.followingSince = now }
    }

    /// The bus daemon's process (`GetConnectionUnixProcessID` of `org.freedesktop.DBus`).
    func noteBusDaemon(_ pid: UInt32) {
        state.withLock { $0.busDaemon = pid }
    }

    /// The census of the names that were on the bus when the following took effect: `claims` holds, for each
    /// process, how many of those names the bus daemon says it made. Each process is noted with whether it then
    /// held that many connections to the bus: one that held fewer had its pid taken over, and a name that claims
    /// it may be a connection left to another process (a sandboxed child) by the one that made it.
    func noteCensus(claims: [UInt32: Int]) {
        guard let daemon = state.withLock({ $0.busDaemon }) else { return }
        let held = countConnections(Set(claims.keys), daemon)
        let census = held.map { held in
            claims.reduce(into: [UInt32: Bool]()) { fits, claim in fits[claim.key] = (held[claim.key] ?? 0) >= claim.value }
        }
        state.withLock { $0.census = census }
    }

    /// A unique name appeared on the bus (`NameOwnerChanged` with no old owner): noted with the time.
    func appeared(_ name: String) {
        guard name.hasPrefix(":") else { return }
        let now = ProcessProof.bootTicks()
        let unique = UniqueName(name)
        state.withLock { state in
            if let unique {
                if state.firstSeen == nil { state.firstSeen = unique }
                if state.latestSeen.map({ $0 < unique }) ?? true { state.latestSeen = unique }
            }
            // A full table keeps what it has: the name left out is refused at its first call (``bound(of:in:)``).
            guard state.appeared.count < limit else { return }
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
    /// kept. A caller whose process id the bus does not tell cannot be proved, and is refused; so is one that
    /// cannot be kept (the table is full), which is asked again at its next call.
    func identity(of name: String, pid: UInt32?) -> PeerIdentity {
        if let known = state.withLock({ $0.identities[name] }) { return known }
        let identity: PeerIdentity
        if let pid {
            switch state.withLock({ (bound(of: name, in: $0), $0.busDaemon, $0.census?[pid]) }) {
            case (.success(let bound), let daemon, let counted):
                let proved = prove(pid, min(bound.appearedBy, ProcessProof.bootTicks()))
                identity =
                    bound.seen || !proved.isProved
                    ? proved : Self.unseen(proved, pid: pid, holds: daemon.flatMap { holdsConnection(pid, $0) }, counted: counted)
            case (.failure(let problem), _, _):
                identity = .unproved(problem.description)
            }
        } else {
            identity = .unproved("the bus daemon does not say which process the caller is")
        }
        return state.withLock { state in
            guard state.identities.count < limit else {
                return .unproved("the broker already keeps the identities of \(limit) callers")
            }
            state.identities[name] = identity
            return identity
        }
    }

    /// A proved identity of a caller the broker did not see appear, kept only if its process holds a connection
    /// to the bus now (`holds`, nil when that cannot be read), and held, when the following took effect, as many
    /// as the names on the bus that claimed it (`counted`, nil when it was not counted): a process that holds
    /// none, or held fewer, is not the caller, but one that took its pid before this broker followed names, which
    /// the start-time rule cannot tell.
    private static func unseen(_ identity: PeerIdentity, pid: UInt32, holds: Bool?, counted: Bool?) -> PeerIdentity {
        switch (holds, counted) {
        case (true?, true?):
            return identity
        case (false?, _):
            return .unproved(
                "its process \(pid) holds no connection to the bus: the pid was taken by another process after the "
                    + "caller connected")
        case (_, false?):
            return .unproved(
                "its process \(pid) held fewer connections to the bus than the names on it that claim the process "
                    + "when the broker began following names: the pid was taken by another process after the caller "
                    + "connected")
        case (_, nil):
            return .unproved(
                "it connected before the broker followed the bus's names, and its process \(pid) was not counted "
                    + "among the connections then on the bus")
        case (nil, _):
            return .unproved(
                "it connected before the broker followed the bus's names, and whether its process \(pid) holds a "
                    + "connection to the bus cannot be read")
        }
    }

    /// Why a caller's appearance gives no bound.
    struct Unplaced: Error, CustomStringConvertible {
        var description: String
    }

    /// The latest moment the name can have appeared on the bus (its process must have started by then):
    /// - seen appearing: that moment;
    /// - appeared before the broker followed names (a caller of an earlier broker, or the one whose call
    ///   started this broker): when the following took effect, never the moment of its call; a pid reused
    ///   after that is caught, and one reused before is what the start-time rule cannot see (decision 0033);
    /// - seen neither before nor after, between names that were seen: its appearance could not be kept, and
    ///   it is refused;
    /// - later than every name seen: its appearance is still on its way on the broker's other connection, and
    ///   it appeared by now.
    private func bound(of name: String, in state: State) -> Result<(appearedBy: UInt64, seen: Bool), Unplaced> {
        if let appeared = state.appeared[name] { return .success((appeared, true)) }
        guard let followingSince = state.followingSince else { return .success((ProcessProof.bootTicks(), true)) }
        guard let unique = UniqueName(name) else {
            return .failure(Unplaced(description: "its unique name '\(name.prefix(40))' cannot be placed among the others"))
        }
        guard let first = state.firstSeen, let latest = state.latestSeen, first <= unique else {
            return .success((followingSince, false))
        }
        guard latest < unique else {
            return .failure(
                Unplaced(
                    description: "the broker could not keep its appearance on the bus (it keeps \(limit) "
                        + "connections'), so its process cannot be proved"))
        }
        return .success((ProcessProof.bootTicks(), true))
    }

    /// Notes a sandboxed caller of the sandboxed apps' name, which then gets the changes it may read; false
    /// when the table is full and the caller cannot be kept (it is then refused: it would miss its changes
    /// unknowingly).
    func listen(_ name: String, as app: AppConfinement) -> Bool {
        state.withLock { state in
            guard state.listeners[name] == nil else { return true }
            guard state.listeners.count < limit else { return false }
            state.listeners[name] = app
            return true
        }
    }

    /// The sandboxed callers that get signals one by one, with their app.
    var listeners: [(name: String, app: AppConfinement)] {
        state.withLock { $0.listeners.map { ($0.key, $0.value) } }
    }
}

extension PeerIdentity {
    /// Whether the caller was proved to be the host or an app.
    var isProved: Bool {
        if case .unproved = self { false } else { true }
    }
}

/// A unique name's place on the bus: `:1.42` is (1, 42). The bus daemon gives them in increasing order, so a
/// name's place tells whether it appeared before or after another.
struct UniqueName: Comparable, Sendable {
    var first: UInt64
    var second: UInt64

    init?(_ name: String) {
        guard name.hasPrefix(":") else { return nil }
        let parts = name.dropFirst().split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let first = UInt64(parts[0]), let second = UInt64(parts[1]) else { return nil }
        (self.first, self.second) = (first, second)
    }

    static func < (left: Self, right: Self) -> Bool { (left.first, left.second) < (right.first, right.second) }
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

    /// Whether the process `pid` holds a connection to the bus whose daemon is the process `busDaemon`: one of its
    /// sockets is the peer of one of the daemon's (`/proc/PID/fd` and the kernel's socket diagnostics). Nil
    /// when that cannot be read.
    @Sendable static func holdsConnection(_ pid: UInt32, of busDaemon: UInt32) -> Bool? {
        connections(of: [pid], busDaemon: busDaemon).map { $0[pid, default: 0] > 0 }
    }

    /// How many connections to the bus whose daemon is the process `busDaemon` each of `pids` holds: its sockets
    /// that are peers of one of the daemon's. A process whose sockets cannot be read (it ended) holds none; nil
    /// when the daemon's sockets or the kernel's socket diagnostics cannot be read.
    @Sendable static func connections(of pids: Set<UInt32>, busDaemon: UInt32) -> [UInt32: Int]? {
        guard let daemonSockets = socketInodes(of: busDaemon), let peers = peersOfSockets(daemonSockets) else {
            return nil
        }
        return pids.reduce(into: [:]) { counts, pid in
            counts[pid] = socketInodes(of: pid).map { $0.intersection(peers).count } ?? 0
        }
    }

    /// The inodes of the sockets whose peers are `sockets` (the kernel's socket diagnostics of Unix sockets); nil
    /// when they cannot be read.
    static func peersOfSockets(_ sockets: Set<UInt32>) -> Set<UInt32>? {
        var capacity = 16_384
        while capacity <= 1 << 22 {
            var inodes = [UInt32](repeating: 0, count: capacity)
            var peers = [UInt32](repeating: 0, count: capacity)
            let count = settingsbus_unix_socket_peers(&inodes, &peers, capacity)
            guard count >= 0 else { return nil }
            guard count <= capacity else {
                capacity = count + 1_024
                continue
            }
            return Set((0..<count).lazy.filter { sockets.contains(inodes[$0]) }.map { peers[$0] })
        }
        return nil
    }

    /// The inodes of the sockets a process holds (`/proc/PID/fd`, links such as `socket:[1234]`); nil when they
    /// cannot be read.
    static func socketInodes(of pid: UInt32) -> Set<UInt32>? {
        let folder = "/proc/\(pid)/fd"
        guard let directory = opendir(folder) else { return nil }
        defer { closedir(directory) }
        var inodes: Set<UInt32> = []
        var link = [CChar](repeating: 0, count: 64)
        while let entry = readdir(directory) {
            let name = BoundedFile.entryName(UnsafeRawPointer(entry))
            guard name.first?.isNumber == true else { continue }
            let length = readlink(folder + "/" + name, &link, link.count - 1)
            guard length > 0 else { continue }
            let target = String(decoding: link[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard target.hasPrefix("socket:["), target.hasSuffix("]"),
                let inode = UInt32(target.dropFirst("socket:[".count).dropLast())
            else { continue }
            inodes.insert(inode)
        }
        return inodes
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
