// SPDX-License-Identifier: Apache-2.0

import DBus
import Dispatch

/// Where a step of a commit runs. The store asks only that the step run once, somewhere, after the steps
/// placed there before it; it knows nothing of the threads behind a placement.
///
/// Two are used: the D-Bus export's (``AfterDispatch``: on the connection's thread once it has dispatched the
/// calls it has read, which a small commit may take) and the store's own ``CommitQueue`` (every other commit).
/// Tests place commits where they like.
public protocol CommitPlacement: Sendable {
    /// Runs `step` later, after the steps placed here before it; or returns false, and `step` does not run,
    /// when it cannot take it (the store then commits on its commit queue).
    func place(_ step: @escaping @Sendable () -> Void) -> Bool
}

/// The store's commit queue: a serial dispatch queue, which takes every step.
struct CommitQueue: CommitPlacement {
    private let queue = DispatchQueue(label: "settings-store-commit")

    @discardableResult
    func place(_ step: @escaping @Sendable () -> Void) -> Bool {
        queue.async(execute: step)
        return true
    }
}

/// The D-Bus export's placement for the commit a write starts: on the connection's thread once it has
/// dispatched every call it has read (``DBus/DBusReply/afterDispatch(_:)``), so that one commit serves them all
/// and its answers leave from that thread. Made on that thread, by the write's deferred handler.
struct AfterDispatch: CommitPlacement {
    let reply: DBusReply

    func place(_ step: @escaping @Sendable () -> Void) -> Bool {
        reply.afterDispatch(step)
    }
}
