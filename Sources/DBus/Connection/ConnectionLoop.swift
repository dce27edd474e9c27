// SPDX-License-Identifier: Apache-2.0

// Design note: the threading model of a connection.
//
// Each libdbus connection is owned by one dedicated thread, its loop. Every libdbus call for the connection
// is made by the holder of the loop's ownership lock: the loop thread, running jobs taken from a queue, or,
// for sending only, another thread while the loop waits in `poll` (below). Swift tasks enqueue jobs and await
// continuations, so no Swift task ever blocks inside libdbus. The loop polls the connection's watch file descriptors, its
// timeouts, the deadlines of pending calls and an eventfd that `enqueue` writes to wake it. Received messages
// are decoded into Swift values on the loop and then routed: replies complete pending calls, signals go to
// the streams whose match rule they satisfy, method calls go to exported objects (whose handlers run as
// Swift tasks and send their replies back as jobs). When the connection closes or is lost, every pending call
// fails with `Disconnected`, every stream ends, and jobs enqueued afterwards are refused.
//
// The loop holds its ownership lock whenever it runs, and lets go of it only while it waits in `poll`. A
// thread that sends (a call, a signal, a reply) takes the lock then, if it can without waiting and no job is
// queued, and sends at once instead of waking the loop to do it (`runNow`): libdbus writes to the socket
// without blocking, so no task waits on it, and the loop's wake-up no longer stands between a call and the
// bus. "Loop thread only" below means: by the thread that holds the lock.

internal import CDBus
internal import Glibc
import Synchronization

/// The owner thread of one libdbus connection and all the state that only that thread touches.
///
/// This type is manually `Sendable` because its mutable state is touched only by the thread that holds its
/// ownership lock: the loop thread, which lets go of it only while it waits in `poll`, or a thread in
/// ``runNow(_:)``, which takes it without waiting or not at all. Other threads reach it only through
/// ``enqueue(_:)``, which goes through the lock-protected job queue and an eventfd. The C callbacks that
/// libdbus invokes are called only from libdbus calls made by the holder of that lock.
final class ConnectionLoop: @unchecked Sendable {
    typealias Job = @Sendable (ConnectionLoop) -> Void

    private struct JobQueue {
        var jobs: [Job] = []
        var closed = false
    }

    private let queue = Locked(JobQueue())
    let wakeFD: Int32
    /// Held by the thread that may touch the loop's state and call libdbus for the connection: the loop
    /// thread, except while it waits in `poll`, when another thread may take it to send at once
    /// (``runNow(_:)``). A pthread mutex, so that ThreadSanitizer sees the ordering it makes.
    let ownership: UnsafeMutablePointer<pthread_mutex_t> = {
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        return mutex
    }()
    /// The loop thread (`pthread_self`), 0 until it runs: a job queued on it needs no wake-up.
    private let loopThread = Atomic<UInt>(0)
    private let exited = Locked<[UInt64: CheckedContinuation<Void, Never>]?>([:])

    // MARK: Loop-thread state

    /// The libdbus connection; nil once closed.
    var connection: OpaquePointer?
    /// Whether the connection is to a message bus (as opposed to a peer).
    var isBusConnection = true
    /// Why the connection ended, once it has.
    var endReason: DBusError?
    private var shouldExit = false
    /// Work to run once the messages read so far have been dispatched (``afterDispatch(_:)``).
    private var dispatchedWork: [() -> Void] = []
    /// Whether that work is running now.
    private var runningDispatchedWork = false
    /// What `pollOnce` polls: the eventfd, then the enabled watches; made again only when a watch is added,
    /// removed, enabled or disabled (``pollSetChanged``).
    var fds: [pollfd] = []
    var polled: [(key: UnsafeMutableRawPointer, watch: OpaquePointer)] = []
    /// Whether the watches changed since `fds` was made.
    var pollSetChanged = true
    /// When the loop's `poll` returns by itself (milliseconds on the monotonic clock; `Int64.max` for never):
    /// ``runNow(_:)`` wakes the loop for a sooner deadline.
    var pollDeadline = Int64.max
    var watches: [UnsafeMutableRawPointer: OpaquePointer] = [:]
    var timeouts: [UnsafeMutableRawPointer: (timeout: OpaquePointer, start: Int64)] = [:]
    var pendingCalls: [UInt32: PendingCall] = [:]
    var rules: [String: RuleState] = [:]
    var trackedNames: [String: NameTrack] = [:]
    var objects: [ObjectPath: ExportedObject] = [:]
    /// The Unix users of callers that handlers asked about.
    var senderUsers = SenderUsers()
    /// The messages this connection has queued for the bus (calls, replies, signals), for measurements.
    var sentMessages: UInt64 = 0
    /// Header strings that received messages share (``HeaderStrings``).
    let headerStrings = HeaderStrings()
    /// The types of the body signatures received messages had, and of the variants in them.
    let signatureTypes = CStringCache<[DBusType]>()
    /// The connection that owns this loop, for method-call contexts; weak to avoid a cycle.
    weak var owner: DBusConnection?

    init() throws(DBusError) {
        let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard fd >= 0 else {
            throw DBusError(.failed, "cannot create an eventfd for the connection loop: errno \(errno)")
        }
        wakeFD = fd
    }

    deinit {
        close(wakeFD)
        pthread_mutex_destroy(ownership)
        ownership.deinitialize(count: 1)
        ownership.deallocate()
    }

    /// Runs a job at once on the calling thread if the loop waits in `poll` with no job queued (so the job
    /// keeps its place in the order jobs were given); returns false, having run nothing, otherwise: the loop is
    /// busy or ended, and the caller enqueues the job. For a job that sends: it must not wait or take long.
    ///
    /// The loop is woken when the job changed what it waits for: the watches to poll, or a deadline (a call's
    /// `NoReply`, a libdbus timeout) sooner than the one its `poll` ends at.
    func runNow(_ job: Job) -> Bool {
        guard pthread_mutex_trylock(ownership) == 0 else { return false }
        defer { pthread_mutex_unlock(ownership) }
        guard connection != nil, queue.withLock({ !$0.closed && $0.jobs.isEmpty }) else { return false }
        job(self)
        if pollSetChanged || nearestDeadline() < pollDeadline { wake() }
        return true
    }

    // MARK: - Jobs

    /// Runs a job on the loop thread. Returns false (and drops the job) when the loop has ended.
    @discardableResult
    func enqueue(_ job: @escaping Job) -> Bool {
        let (accepted, first) = queue.withLock { state -> (Bool, Bool) in
            guard !state.closed else { return (false, false) }
            state.jobs.append(job)
            return (true, state.jobs.count == 1)
        }
        // Jobs already waiting mean a wake-up is on its way, or the loop has taken it and runs every queued
        // job before it polls again (it reads the eventfd before it takes the jobs). A job queued on the loop
        // thread needs none: the loop looks at the queue before it polls.
        if accepted && first && !isLoopThread { wake() }
        return accepted
    }

    /// Whether the calling thread is the loop thread.
    var isLoopThread: Bool { loopThread.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// Runs `work` on the loop thread once every message read so far has been dispatched, before the loop waits
    /// for more: work that serves several of those messages at once. Loop thread only; returns false elsewhere.
    func afterDispatch(_ work: @escaping () -> Void) -> Bool {
        guard isLoopThread, connection != nil else { return false }
        dispatchedWork.append(work)
        return true
    }

    private func wake() {
        var one: UInt64 = 1
        _ = withUnsafeBytes(of: &one) { write(wakeFD, $0.baseAddress, 8) }
    }

    /// Runs a job on the loop thread and returns its result; fails with `Disconnected` once the loop ended.
    func perform<T: Sendable>(_ body: @escaping @Sendable (ConnectionLoop) throws(DBusError) -> T) async throws(DBusError)
        -> T
    {
        let result: Result<T, DBusError> = await handOff { deliver in
            let accepted = enqueue { loop in
                do throws(DBusError) {
                    deliver(.success(try body(loop)))
                } catch {
                    deliver(.failure(error))
                }
            }
            if !accepted { deliver(.failure(ConnectionLoop.closedError)) }
        }
        return try result.get()
    }

    static let closedError = DBusError(.disconnected, "the D-Bus connection is closed")

    /// Waits until the loop thread has finished, or until the calling task is cancelled.
    func waitUntilExited() async {
        let id = ConnectionLoop.nextWaiterID.wrappingAdd(1, ordering: .relaxed).oldValue
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let done = exited.withLock { waiters -> Bool in
                    guard waiters != nil, !Task.isCancelled else { return true }
                    waiters![id] = continuation
                    return false
                }
                if done { continuation.resume() }
            }
        } onCancel: {
            let waiter = exited.withLock { waiters in waiters?.removeValue(forKey: id) }
            waiter?.resume()
        }
    }

    private static let nextWaiterID = Atomic<UInt64>(1)

    // MARK: - Thread

    /// Starts the loop thread, which first runs `open` to make the connection.
    ///
    /// - Throws: ``DBusError`` `Failed` when the system cannot start another thread; `open` does not run,
    ///   and the loop is finished as if its connection had ended.
    func start(open: @escaping @Sendable (ConnectionLoop) -> Void) throws(DBusError) {
        let result = startThread(name: "dbus-connection", stackSize: 8 << 20) { [self] in
            pthread_mutex_lock(ownership)
            defer { pthread_mutex_unlock(ownership) }
            loopThread.store(UInt(pthread_self()), ordering: .relaxed)
            open(self)
            if connection != nil { run() }
            finish()
            loopThread.store(0, ordering: .relaxed)
        }
        guard result == 0 else {
            // No loop thread exists, so this thread may finish the loop in its place.
            finish()
            throw DBusError(.failed, "cannot start the connection's thread: \(String(cString: strerror(result)))")
        }
    }

    private func run() {
        while true {
            runJobs()
            if shouldExit || connection == nil { return }
            dispatchAll()
            runDispatchedWork()
            // The connection may have ended while dispatching (the bus's `Disconnected`): then nothing is left to
            // poll but the eventfd, and waiting on it alone would never end.
            if shouldExit || connection == nil { return }
            // Jobs queued on this thread (by the work above, by handlers, by tasks on the connection's
            // executor) woke nothing: poll without waiting, so that they run next and reading still goes on.
            pollOnce(waiting: !hasJobs)
            // A loop that waits for no call and has no libdbus timeout reads no clock.
            if !timeouts.isEmpty || !pendingCalls.isEmpty {
                fireTimeouts()
                expireCalls(now: monotonicMillis())
            }
        }
    }

    private func runJobs() {
        let jobs = queue.withLock { state -> [Job] in
            let jobs = state.jobs
            state.jobs.removeAll(keepingCapacity: true)
            return jobs
        }
        for job in jobs { job(self) }
    }

    private var hasJobs: Bool { queue.withLock { !$0.jobs.isEmpty } }

    private func runDispatchedWork() {
        runningDispatchedWork = true
        defer { runningDispatchedWork = false }
        while !dispatchedWork.isEmpty {
            let work = dispatchedWork
            dispatchedWork.removeAll()
            for item in work { item() }
        }
    }

    /// Sends a message at once when no job is queued ahead of it (so messages keep the order they were given
    /// in) and the loop is free: called on the loop thread by work after dispatch, or on another thread while
    /// the loop waits (``runNow(_:)``). Otherwise queues the send. Returns false when the loop has ended. Any
    /// thread.
    ///
    /// Another thread builds the libdbus message before it takes the loop: a large one (the `Changed` signal of
    /// a commit of 100,000 keys) would otherwise hold up the loop, and every call waiting on it, while it is
    /// written.
    func sendSoon(_ message: DBusMessage) -> Bool {
        if isLoopThread {
            if runningDispatchedWork, !hasJobs {
                send(message)
                return true
            }
            return enqueue { $0.send(message) }
        }
        guard let encoded = EncodedMessage(message) else { return enqueue { _ in } }
        if runNow({ $0.send(encoded) }) { return true }
        return enqueue(send: encoded)
    }

    /// Queues the send of a message built off the loop thread; releases it and returns false when the loop has
    /// ended.
    func enqueue(send encoded: EncodedMessage) -> Bool {
        guard enqueue({ $0.send(encoded) }) else {
            encoded.release()
            return false
        }
        return true
    }

    /// Ends the connection (if still open), refuses new jobs, runs the ones queued so they fail cleanly.
    private func finish() {
        if connection != nil { closeConnection(reason: ConnectionLoop.closedError) }
        // Work promised to run after dispatch still runs: its owners count on it (a store's commit).
        runDispatchedWork()
        let remaining = queue.withLock { state -> [Job] in
            state.closed = true
            let jobs = state.jobs
            state.jobs = []
            return jobs
        }
        for job in remaining { job(self) }
        let waiters = exited.withLock { waiters -> [CheckedContinuation<Void, Never>] in
            let list = waiters.map { Array($0.values) } ?? []
            waiters = nil
            return list
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Asks the loop to close the connection and exit. Loop thread only.
    func requestExit() {
        shouldExit = true
    }

    /// Closes the libdbus connection and fails everything that waits on it. Loop thread only.
    func closeConnection(reason: DBusError) {
        guard let pointer = connection else { return }
        endReason = reason
        connection = nil
        shouldExit = true
        failAllPending(reason)
        finishAllStreams()
        dbus_connection_close(pointer)
        dbus_connection_unref(pointer)
        watches.removeAll()
        timeouts.removeAll()
        pollSetChanged = true
    }
}

/// Milliseconds on a monotonic clock.
func monotonicMillis() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}
