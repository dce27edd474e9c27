// SPDX-License-Identifier: Apache-2.0

/// How much each measurement does. Every loop stops at its count or its time limit, whichever comes first.
struct BenchPlan: Sendable {
    /// Round trips of each kind (GetId, Ping, Get), interleaved, after `warmUp` unrecorded ones.
    var roundTrips: Int
    var warmUp: Int
    /// Batches of 1000 local reads.
    var cachedReadBatches: Int
    /// Durable writes of each system.
    var durableWrites: Int
    /// Writes whose delivery to another process is timed.
    var deliveries: Int
    /// Subscriber processes for the fan-out measurements, and writes per measurement.
    var fanOuts: [Int]
    var fanOutWrites: Int
    /// Concurrent writer processes, and how long each run writes.
    var writerCounts: [Int]
    var writerSeconds: Double
    /// Store sizes (a store with no keys is measured first, before these), writes timed at each size, and
    /// timed starts at each size (the idle memory is read after the last).
    var storeSizes: [Int]
    var writesPerSize: Int
    var startsPerSize: Int
    /// The time limit of each loop, in seconds.
    var loopSeconds: Double
    /// Directories: keys beside a 3-key directory, `ReadTree` and `List` of it timed in each store, another
    /// client's `Get`s with nothing else going on, the keys of a large directory, and the `ReadTree`s and
    /// `Reset`s of it during which that client's `Get`s are timed.
    var directoryStoreKeys: Int
    var directoryReads: Int
    var quietGets: Int
    var bigDirectoryKeys: Int
    var bigReads: Int
    var bigResets: Int
    /// Sync: keys a machine joining finds in the database; brokers on one server; changes timed to all of
    /// them in each mode; how long nothing changes while the server's load is read; the polling interval.
    var firstSyncKeys = 10_000
    var syncMachines = 50
    var syncChanges = 5
    var syncIdleSeconds = 30.0
    var syncPollSeconds = 5
    /// GSettings: the apps whose memory is read with each backend (the median is kept).
    var gsettingsMemoryRuns = 3
    /// The settings editor: registered keys in its store, timed starts, page loads and searches of each kind.
    var editorKeys = 100_000
    var editorStarts = 3
    var editorLoads = 20
    var editorSearches = 20

    /// The full run: about three minutes on two cores.
    static let full = BenchPlan(
        roundTrips: 5000, warmUp: 100, cachedReadBatches: 2000, durableWrites: 500, deliveries: 300,
        fanOuts: [10, 50], fanOutWrites: 50, writerCounts: [1, 4, 16], writerSeconds: 5,
        storeSizes: [1_000, 10_000, 100_000], writesPerSize: 200, startsPerSize: 5, loopSeconds: 30,
        directoryStoreKeys: 1_000_000, directoryReads: 500, quietGets: 2000, bigDirectoryKeys: 100_000, bigReads: 10,
        bigResets: 3)

    /// The smoke run (`--smoke`): every measurement once with tiny counts, in seconds, to check that it works.
    static let smoke = BenchPlan(
        roundTrips: 20, warmUp: 2, cachedReadBatches: 10, durableWrites: 5, deliveries: 3,
        fanOuts: [2, 3], fanOutWrites: 2, writerCounts: [1, 2], writerSeconds: 0.3,
        storeSizes: [100, 1_000], writesPerSize: 3, startsPerSize: 1, loopSeconds: 5,
        directoryStoreKeys: 1_000, directoryReads: 5, quietGets: 10, bigDirectoryKeys: 500, bigReads: 2, bigResets: 1,
        firstSyncKeys: 300, syncMachines: 3, syncChanges: 2, syncIdleSeconds: 2, syncPollSeconds: 1,
        gsettingsMemoryRuns: 1, editorKeys: 1_000, editorStarts: 1, editorLoads: 2, editorSearches: 2)
}
