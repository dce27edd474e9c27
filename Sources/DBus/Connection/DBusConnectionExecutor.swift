// SPDX-License-Identifier: Apache-2.0

import Dispatch

/// A task executor that runs jobs on a connection's own thread, between its reads and writes.
///
/// A task that prefers it (`Task(executorPreference:)`, `withTaskExecutorPreference(_:operation:)`) is
/// resumed on the thread that read the message it waits for: a stream's consumer gets each signal without a
/// second thread being woken, which is most of what a process spends on a signal it receives.
///
/// ```swift
/// let changes = try await bus.signals(matching: rule)
/// Task(executorPreference: bus.executor) {
///     for await signal in changes { print(signal.body) }
/// }
/// ```
///
/// - Important: While a job runs, the connection reads and sends nothing: code running on this executor must
///   not block or wait (short locks only) and should hand long work to another task. Awaiting is fine, calls
///   on the same connection included. Once the connection has ended, jobs run on a global dispatch queue.
public final class DBusConnectionExecutor: TaskExecutor {
    private let loop: ConnectionLoop

    init(loop: ConnectionLoop) {
        self.loop = loop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        enqueue(job, as: asUnownedTaskExecutor())
    }

    /// Runs `job` on the connection's thread as a job of `executor`, for a task executor that hands its jobs
    /// on to this one: a job must run as a job of the executor its task prefers, or the task hops to that
    /// executor again at its next switch. Once the connection has ended, the job runs on a global dispatch
    /// queue, still as a job of `executor`.
    public func enqueue(_ job: consuming ExecutorJob, as executor: UnownedTaskExecutor) {
        let job = UnownedJob(job)
        guard loop.enqueue({ _ in job.runSynchronously(on: executor) }) else {
            DispatchQueue.global().async { job.runSynchronously(on: executor) }
            return
        }
    }
}
