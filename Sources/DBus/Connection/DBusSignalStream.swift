// SPDX-License-Identifier: Apache-2.0

/// The signals selected by one match rule, as an `AsyncSequence`.
///
/// The stream ends when the connection closes. Its share of the match rule is released when its task is
/// cancelled or when the stream and its iterators are released.
///
/// - Important: Like `AsyncStream`, a stream has a single consumer; make one stream per consumer.
public struct DBusSignalStream: AsyncSequence, Sendable {
    public typealias Element = DBusMessage
    public typealias Failure = Never

    let stream: AsyncStream<DBusMessage>
    let subscription: DBusSignalSubscription

    /// Makes the iterator.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), subscription: subscription)
    }

    /// The iterator of a ``DBusSignalStream``.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<DBusMessage>.Iterator
        let subscription: DBusSignalSubscription

        /// The next signal, or nil once the stream has ended.
        public mutating func next() async -> DBusMessage? {
            await base.next(isolation: #isolation)
        }

        /// The next signal, or nil once the stream has ended, staying on the caller's actor.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> DBusMessage? {
            await base.next(isolation: actor)
        }
    }
}

@available(*, unavailable)
extension DBusSignalStream.AsyncIterator: Sendable {}
