// SPDX-License-Identifier: Apache-2.0

/// What one run measured; nil or empty where a measurement was not taken.
struct BenchResults: Sendable {
    /// Floors: `GetId` to the bus daemon; `Peer.Ping` to the broker and to dconf-service.
    var getID = Samples()
    var pingBroker = Samples()
    var pingDconf = Samples()
    /// `Get` called on a plain connection, and the client library's `get` of a key it does not watch.
    var rawGet = Samples()
    var clientGet = Samples()
    /// Local reads, in nanoseconds per read (median of batches of 1000).
    var cachedRead: Double?
    /// Messages the client's connection sent during the local reads (counted by the connection itself).
    var cachedReadMessages: UInt32?
    var dconfRead: Double?
    /// `get(key)` of a key the store does not watch, in a store connected that has read nothing: its first, and
    /// the later ones (ns, median of batches of 100), and the messages its connection sent meanwhile.
    var unwatchedFirstGet: Double?
    var unwatchedGet: Double?
    var unwatchedGetMessages: UInt32?
    /// Durable writes of one key.
    var durableSet = Samples()
    var dconfWrite = Samples()
    /// From before a write in this process to the value's arrival in another process's stream.
    var delivery = Samples()
    var dconfDelivery = Samples()
    /// Subscriber processes → time until the last of them has the value.
    var fanOut: [Int: Samples] = [:]
    /// The largest fan-out with subscribers consuming on their connection's thread, and dconf's beside it.
    var fanOutOnConnection = Samples()
    var dconfFanOutBeside = Samples()
    var dconfFanOut: [Int: Samples] = [:]
    /// Writer processes → the run.
    var writers: [Int: WriterRun] = [:]
    var dconfWriters: [Int: WriterRun] = [:]
    /// Keys in the store → writes, memory and start at that size.
    var sizes: [Int: SizeRun] = [:]
    var dconfSizes: [Int: SizeRun] = [:]
    /// Directory operations against the store's size.
    var directories: DirectoryRun?
    var administrator: AdministratorRun?
    /// What identifying a caller costs, from the host and from a sandbox.
    var sandbox: SandboxRun?
    /// The GIO module against dconf's GSettings backend, or why it was not measured.
    var gsettings: GSettingsRun?
    var gsettingsMissing: String?
    /// Sync across machines, or why it was not measured.
    var sync: SyncRun?
    var syncMissing: String?
    /// The settings editor on a large store.
    var editor: EditorRun?
}

/// Concurrent writer processes writing distinct keys for a fixed time.
struct WriterRun: Sendable {
    /// Acknowledged writes per second, over all writers.
    var writesPerSecond: Double
    var acknowledged: Int
    var failed: Int
    /// Acknowledged writes whose value was not found afterwards.
    var missing: Int
}

/// A store of a given size.
struct SizeRun: Sendable {
    /// Writing all the keys in one call (`Apply`; dconf: one `Change`), in nanoseconds.
    var load: Double?
    /// From the first call to the (not running) service's name to its reply: D-Bus activation, start-up and
    /// loading the store. For the broker the call is `Get` of a stored key; dconf-service serves no reads,
    /// so for it the call is `Peer.Ping`.
    var start = Samples()
    /// Durable writes of one key.
    var writes = Samples()
    /// The service's memory once it has started on the store and answered its first call (the last of the
    /// timed starts), before the writes.
    var idle: ProcessMemory?
    /// The service's resident memory after the writes, in KiB.
    var residentKiB: Int?
}

/// Directory operations against the store's size (SettingsBus only).
struct DirectoryRun: Sendable {
    /// Keys beside the 3-key directory, and keys of the large directory.
    var storeKeys: Int
    var bigKeys: Int
    /// `ReadTree` and `List` of a 3-key directory alone in the store and beside `storeKeys` keys.
    var smallReadTreeAlone = Samples()
    var smallListAlone = Samples()
    var smallReadTreeBeside = Samples()
    var smallListBeside = Samples()
    /// Another client's `Get`: with nothing else going on, while `ReadTree`s of the large directory run, and
    /// while `Reset`s of it run.
    var quietGets = Samples()
    var getsDuringReadTree = Samples()
    var getsDuringReset = Samples()
    /// The `ReadTree`s and `Reset`s of the large directory themselves.
    var bigReadTree = Samples()
    var bigReset = Samples()
}

/// The broker with and without an administrator's layer (SettingsBus only).
struct AdministratorRun: Sendable {
    /// The layer's defaults and locks.
    var keys: Int
    var locks: Int
    /// Starts by D-Bus activation to the first `Get` reply, with and without the layer.
    var startWith = Samples()
    var startWithout = Samples()
    /// `Get` of a user's value, with and without the layer, and of a locked key.
    var getWith = Samples()
    var getWithout = Samples()
    var getLocked = Samples()
}

/// Sync across machines through one PostgreSQL server.
struct SyncRun: Sendable {
    /// The brokers of the scale measurements, and the keys of the first sync.
    var machines: Int
    var firstSyncKeys: Int
    /// One write on A, timed to a subscriber on A's bus and to one on B's.
    var localDelivery = Samples()
    var syncDelivery = Samples()
    /// A machine joining: from its start until it has every key, in nanoseconds.
    var firstSync: Double?
    var listening: ScaleRun?
    var polling: ScaleRun?
}

/// The brokers on one server, in one mode.
struct ScaleRun: Sendable {
    var mode: String
    /// One change on one machine until every other has announced it.
    var reachAll = Samples()
    /// The most connections the server held for the brokers.
    var mostConnections = 0
    /// The server's load while nothing changed.
    var idle: IdleLoad?
}

/// A server's load over a quiet time, per minute.
struct IdleLoad: Sendable {
    var cpuMillisecondsPerMinute: Double
    var transactionsPerMinute: Double
    var sessionsPerMinute: Double
    /// How long a session lasted, on average (for a polling broker, one sync); nil without sessions.
    var meanSessionMilliseconds: Double?
}

/// A client's new connections and known ones, timed (``Bench/measureSandbox()``).
struct IdentificationSamples: Sendable {
    /// The first call of a new connection: a `Get` (the caller identified first) and a `Peer.Ping`.
    var firstGet = Samples()
    var firstPing = Samples()
    /// Calls of a caller the broker knows.
    var knownGet = Samples()
    var knownPing = Samples()
}

/// What identifying a caller costs, from the host and from a bubblewrap sandbox.
struct SandboxRun: Sendable {
    var host = IdentificationSamples()
    var sandboxed: IdentificationSamples?
    /// Why the sandboxed client was not measured.
    var sandboxedMissing: String?
}
