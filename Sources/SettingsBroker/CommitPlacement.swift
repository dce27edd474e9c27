// SPDX-License-Identifier: Apache-2.0

import DBus

/// Where a writer asks ``WritePath`` to run the small commit its write starts, instead of the commit queue:
/// the caller's decision, made when it writes. The write path asks only that the step run once, somewhere,
/// after the steps placed there before it.
///
/// The D-Bus export gives ``AfterDispatch`` (on the connection's thread once it has dispatched the calls it
/// has read). Tests place commits where they like.
protocol CommitPlacement: Sendable {
    /// Runs `step` later, after the steps placed here before it; or returns false, and `step` does not run,
    /// when it cannot take it (the write path then commits on its commit queue).
    func place(_ step: @escaping @Sendable () -> Void) -> Bool
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
