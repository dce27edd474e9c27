// SPDX-License-Identifier: Apache-2.0

import Dispatch
import Synchronization

/// Where the D-Bus export prepares writes that would hold up the connection's thread (a `Reset` of a
/// directory, which collects every key below it; a long `SetFromString` text, which is parsed), in the order
/// they arrived.
///
/// While any write is waiting here, every later write comes here too, behind it, so that writes are staged
/// in the order the broker read them (a `Reset` of a directory and then a `Set` of a key in it leave the key
/// set). When nothing waits, writes are prepared on the connection's thread as before, and a small commit
/// runs there.
final class WriteHandOff: Sendable {
    private let queue = DispatchQueue(label: "settings-write-hand-off")
    /// Writes handed off and not yet staged. Counted up on the connection's thread, down on the queue.
    private let pending = Atomic<Int>(0)

    /// Whether a write handed off earlier is still waiting: then a new one must follow it here.
    var isBusy: Bool { pending.load(ordering: .acquiring) > 0 }

    /// Runs `work` on the hand-off queue, after every write handed off before it.
    func run(_ work: @escaping @Sendable () -> Void) {
        pending.add(1, ordering: .relaxed)
        queue.async {
            work()
            self.pending.subtract(1, ordering: .releasing)
        }
    }
}
