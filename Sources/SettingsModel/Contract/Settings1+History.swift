// SPDX-License-Identifier: Apache-2.0

public import DBus

// MARK: - History

extension Settings1 {
    /// `History(s keyOrDir, t since_serial, x since_time, u limit) → a(txssua(ssavav)) commits`: the commits
    /// the broker kept that changed user values, oldest first, a page at a time.
    ///
    /// `keyOrDir` is a key or a directory (empty or `/` for every key): only commits that changed a key there
    /// are answered, with only those keys. `since_serial` and `since_time` (microseconds since the epoch) leave
    /// out commits at or before that serial, or before that time (0: no bound). `limit` keeps the newest that
    /// many commits (0: every kept commit).
    ///
    /// A reply holds the oldest of the commits asked for that fit in ``HistoryReply/pageSize`` bytes (as
    /// `DBusValue.approximateSize` counts them), and at least one. The rest are asked for with the same
    /// arguments and `since_serial` set to the last serial answered (``next(after:answered:)``), until a reply is
    /// empty (or, with a limit, that many commits were answered).
    public struct HistoryRequest: Request {
        public typealias Reply = HistoryReply
        public static let method: MemberName = "History"
        public static let arguments = [
            DBusArgument("keyOrDir", .string), DBusArgument("since_serial", .uint64),
            DBusArgument("since_time", .int64), DBusArgument("limit", .uint32),
        ]
        public static var sinceVersion: UInt32 { 2 }

        /// The key or directory whose changes are asked for (the root directory for all).
        public var location: SettingLocation
        /// Commits at or before this serial are left out (0: none).
        public var sinceSerial: UInt64
        /// Commits before this time, in microseconds since the epoch, are left out (0: none).
        public var sinceTime: Int64
        /// The newest this many commits are answered (0: all that are kept).
        public var limit: UInt32

        /// Makes the request.
        public init(
            location: SettingLocation = .directory(.root), sinceSerial: UInt64 = 0, sinceTime: Int64 = 0,
            limit: UInt32 = 0
        ) {
            self.location = location
            self.sinceSerial = sinceSerial
            self.sinceTime = sinceTime
            self.limit = limit
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "History")
            guard case .string(let text) = body[0] else {
                throw reader.wrongType(0, .invalidKey, "a key or directory string")
            }
            location = text.isEmpty ? .directory(.root) : try reader.location(0)
            sinceSerial = try reader.uint64(1)
            guard case .int64(let time) = body[2] else { throw reader.wrongType(2, .invalidValue, "an int64 (x)") }
            guard time >= 0 else {
                throw .invalidValue("argument 'since_time' of History must be 0 or microseconds since the epoch, not \(time)")
            }
            sinceTime = time
            guard case .uint32(let limit) = body[3] else { throw reader.wrongType(3, .invalidValue, "a uint32 (u)") }
            self.limit = limit
        }

        public var body: [DBusValue] {
            [.string(location.rawValue), .uint64(sinceSerial), .int64(sinceTime), .uint32(limit)]
        }

        /// The request for the page after `reply`, nil when there is none: `reply` is empty, or the pages so far
        /// hold the `limit` commits asked for (`answered`, `reply`'s included). It is this request from the last
        /// serial answered, with the same limit: the newest `limit` commits after that serial are the rest of
        /// those first asked for, and any commit made since comes after them (a caller keeps the first
        /// `limit` answered in all).
        public func next(after reply: HistoryReply, answered: Int) -> HistoryRequest? {
            guard let last = reply.commits.last else { return nil }
            if limit > 0 && answered >= Int(limit) { return nil }
            var next = self
            next.sinceSerial = last.serial
            return next
        }
    }

    /// The reply of `History`: `a(txssua(ssavav)) commits`, oldest first: a page of at most ``pageSize`` bytes
    /// (more for a single commit larger than that).
    public struct HistoryReply: MessageBody {
        /// The most bytes of commits one reply holds, as `DBusValue.approximateSize` counts them: 1 MiB. A
        /// page is far below what a bus carries in one message, and reading it holds little in memory.
        public static let pageSize = 1 << 20

        static let changeType = DBusType.structure([.string, .string, .array(.variant), .array(.variant)])
        static let commitType = DBusType.structure([.uint64, .int64, .string, .string, .uint32, .array(changeType)])
        public static let arguments = [DBusArgument("commits", .array(commitType))]

        /// One commit: `(t serial, x time, s writer, s process, u pid, a(ssavav) changes)`.
        public struct Commit: Sendable, Hashable {
            /// The commit's serial.
            public var serial: UInt64
            /// When it was committed, in microseconds since the epoch.
            public var time: Int64
            /// The writer's unique bus name (`:1.42`), or what else wrote: `schema file PATH`.
            public var writer: String
            /// The writer's process name (`/proc/PID/comm`), empty when the bus could not tell.
            public var process: String
            /// The writer's process id, 0 when the bus could not tell.
            public var pid: UInt32
            /// The keys it changed, in key order.
            public var changes: [Change]

            /// Makes a commit.
            public init(serial: UInt64, time: Int64, writer: String, process: String, pid: UInt32, changes: [Change]) {
                self.serial = serial
                self.time = time
                self.writer = writer
                self.process = process
                self.pid = pid
                self.changes = changes
            }
        }

        /// One key's change: `(s key, s omitted, av old, av new)`.
        public struct Change: Sendable, Hashable {
            /// The key.
            public var key: String
            /// Why the values are left out: empty when they are kept; `secret` for a key registered as secret;
            /// `large` for a commit of more keys, or a value larger, than the history keeps values of.
            public var omitted: String
            /// The user value before the commit; nil when the key had none (or the values are left out).
            public var old: DBusValue?
            /// The user value after the commit; nil when the commit removed it (a reset), or the values are
            /// left out.
            public var new: DBusValue?

            /// Makes a change.
            public init(key: String, omitted: String = "", old: DBusValue?, new: DBusValue?) {
                self.key = key
                self.omitted = omitted
                self.old = old
                self.new = new
            }
        }

        /// The commits, oldest first.
        public var commits: [Commit]

        /// Makes the reply.
        public init(commits: [Commit]) {
            self.commits = commits
        }

        public init(_ body: [DBusValue]) throws(SettingsError) {
            let reader = try BodyReader(body, Self.arguments, "the reply of History")
            guard case .array(Self.commitType, let elements) = body[0] else { throw reader.wrongType(0) }
            func maybe(_ value: DBusValue) -> DBusValue?? {
                guard case .array(.variant, let items) = value, items.count <= 1 else { return nil }
                guard case .variant(let inner)? = items.first else { return .some(nil) }
                return .some(inner)
            }
            var commits: [Commit] = []
            for element in elements {
                guard case .structure(let fields) = element, fields.count == 6,
                    case .uint64(let serial) = fields[0], case .int64(let time) = fields[1],
                    case .string(let writer) = fields[2], case .string(let process) = fields[3],
                    case .uint32(let pid) = fields[4], case .array(_, let items) = fields[5]
                else { throw reader.wrongType(0) }
                var changes: [Change] = []
                for item in items {
                    guard case .structure(let parts) = item, parts.count == 4, case .string(let key) = parts[0],
                        case .string(let omitted) = parts[1], let old = maybe(parts[2]), let new = maybe(parts[3])
                    else { throw reader.wrongType(0) }
                    changes.append(Change(key: key, omitted: omitted, old: old, new: new))
                }
                commits.append(
                    Commit(serial: serial, time: time, writer: writer, process: process, pid: pid, changes: changes))
            }
            self.commits = commits
        }

        public var body: [DBusValue] {
            [.array(Self.commitType, commits.map(Self.element))]
        }

        /// One commit as an element of the reply's array.
        static func element(_ commit: Commit) -> DBusValue {
            func maybe(_ value: DBusValue?) -> DBusValue { .array(.variant, value.map { [.variant($0)] } ?? []) }
            return .structure([
                .uint64(commit.serial), .int64(commit.time), .string(commit.writer), .string(commit.process),
                .uint32(commit.pid),
                .array(
                    Self.changeType,
                    commit.changes.map {
                        .structure([.string($0.key), .string($0.omitted), maybe($0.old), maybe($0.new)])
                    }),
            ])
        }

        /// What a commit takes in a reply, as ``pageSize`` counts it; with room for a process name (16 bytes
        /// at most) filled in later.
        public static func approximateSize(of commit: Commit) -> Int {
            element(commit).approximateSize + (commit.process.isEmpty ? 16 : 0)
        }
    }
}
