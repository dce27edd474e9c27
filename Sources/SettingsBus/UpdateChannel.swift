// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The stream between a ``WatchHub`` and one consumer of its updates: what `AsyncStream` does for this one
/// element type, with less work per update.
///
/// The hub yields on the connection's thread under its own lock; the consumer takes updates in its own task.
/// Updates wait in a buffer that keeps all of them, or only the newest `limit`. A waiting consumer is resumed
/// without a value and takes the update from the buffer under the lock, so the lock (a pthread mutex) orders
/// the hub's writes before the consumer's reads where ThreadSanitizer can see it.
///
/// The channel ends when the hub finishes it, when the consuming task is cancelled, or when the consumer's
/// side (``Consumer``, held by every copy of the ``SettingsUpdates`` and its iterators) is released; each time
/// `onTermination` runs once, outside the lock. Like `AsyncStream`, it has one consumer: two tasks waiting at
/// once is a programming error and stops the process.
final class UpdateChannel: Sendable {
    private struct State {
        /// Updates not taken yet, from `head` on.
        var buffer: [SettingsUpdate] = []
        var head = 0
        var waiter: UnsafeContinuation<Void, Never>?
        /// Finished: what is buffered is still taken, then the end.
        var finished = false
        /// Cancelled or released: nothing more is taken.
        var cancelled = false
        var onTermination: (@Sendable () -> Void)?

        var pending: Int { buffer.count - head }

        mutating func take() -> SettingsUpdate? {
            guard !cancelled, head < buffer.count else { return nil }
            let update = buffer[head]
            dropOldest()
            return update
        }

        /// Moves past the oldest update, and lets go of the updates moved past once they are many.
        mutating func dropOldest() {
            head += 1
            if head == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 32, head * 2 >= buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
        }

        /// Ends the channel: the waiter to resume and the termination handler to call, each at most once.
        mutating func end(cancelling: Bool) -> (UnsafeContinuation<Void, Never>?, (@Sendable () -> Void)?) {
            if cancelling {
                cancelled = true
                buffer = []
                head = 0
            }
            finished = true
            defer {
                waiter = nil
                onTermination = nil
            }
            return (waiter, onTermination)
        }
    }

    private let state = Locked(State())
    /// At most this many updates wait; the oldest is dropped for a new one. Nil: no limit.
    private let limit: Int?

    init(keepingNewest limit: Int?) {
        precondition(limit.map { $0 > 0 } ?? true, "a channel must keep at least one update")
        self.limit = limit
    }

    /// Sets what runs once when the channel ends; it runs at once if the channel has ended already.
    func setOnTermination(_ handler: @escaping @Sendable () -> Void) {
        let ended = state.withLock { state -> Bool in
            guard !state.finished else { return true }
            state.onTermination = handler
            return false
        }
        if ended { handler() }
    }

    /// How many updates the channel holds in memory, taken or dropped ones included until they are let go.
    var heldUpdates: Int { state.withLock { $0.buffer.count } }

    // MARK: - The hub's side

    /// Passes an update to the consumer; dropped once the channel has ended.
    func yield(_ update: SettingsUpdate) {
        buffer(update)?.resume()
    }

    /// Buffers an update and returns the consumer waiting for it, for the caller to resume: a caller handing one
    /// update to several channels resumes their consumers once every channel holds it.
    func buffer(_ update: SettingsUpdate) -> UnsafeContinuation<Void, Never>? {
        state.withLock { state -> UnsafeContinuation<Void, Never>? in
            guard !state.finished else { return nil }
            if let limit, state.pending >= limit { state.dropOldest() }
            state.buffer.append(update)
            defer { state.waiter = nil }
            return state.waiter
        }
    }

    /// Ends the channel once the consumer has taken what is buffered.
    func finish() {
        let (waiter, onTermination) = state.withLock { $0.end(cancelling: false) }
        waiter?.resume()
        onTermination?()
    }

    // MARK: - The consumer's side

    /// Ends the channel and drops what is buffered.
    func cancel() {
        let (waiter, onTermination) = state.withLock { $0.end(cancelling: true) }
        waiter?.resume()
        onTermination?()
    }

    /// The next update; nil once the channel has ended (or the task is cancelled).
    func next() async -> SettingsUpdate? {
        while true {
            let (update, ended) = state.withLock { state in (state.take(), state.finished) }
            if let update { return update }
            if ended { return nil }
            await withTaskCancellationHandler {
                await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                    let ready = state.withLock { state -> Bool in
                        if state.pending > 0 || state.finished { return true }
                        precondition(state.waiter == nil, "two tasks wait on one SettingsUpdates stream at once")
                        state.waiter = continuation
                        return false
                    }
                    if ready { continuation.resume() }
                }
            } onCancel: {
                cancel()
            }
        }
    }

    /// The consumer's hold on a channel: when the last copy of the stream and its iterators is released, the
    /// channel is cancelled, as an `AsyncStream` is.
    final class Consumer: Sendable {
        let channel: UpdateChannel

        init(_ channel: UpdateChannel) {
            self.channel = channel
        }

        deinit {
            channel.cancel()
        }
    }
}
