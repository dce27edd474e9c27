// SPDX-License-Identifier: Apache-2.0

/// A change of the owner of a bus name, as `org.freedesktop.DBus.NameOwnerChanged` announces it.
public struct NameOwnerChange: Sendable, Hashable {
    /// The name whose owner changed.
    public var name: BusName
    /// The unique name of the previous owner; nil when the name had no owner.
    public var oldOwner: BusName?
    /// The unique name of the new owner; nil when the name now has no owner.
    public var newOwner: BusName?

    /// Makes a change.
    public init(name: BusName, oldOwner: BusName?, newOwner: BusName?) {
        self.name = name
        self.oldOwner = oldOwner
        self.newOwner = newOwner
    }

    /// Reads a `NameOwnerChanged` signal; nil for any other message.
    init?(_ message: DBusMessage) {
        guard message.body.count == 3, case .string(let name) = message.body[0],
            case .string(let old) = message.body[1], case .string(let new) = message.body[2],
            let busName = try? BusName(name)
        else { return nil }
        self.name = busName
        self.oldOwner = old.isEmpty ? nil : try? BusName(old)
        self.newOwner = new.isEmpty ? nil : try? BusName(new)
    }
}

/// The owner changes of one bus name, as an `AsyncSequence` made by
/// ``DBusConnection/nameOwnerChanges(of:)``.
///
/// The sequence ends when the connection closes. Like ``DBusSignalStream``, which it wraps, it has a single
/// consumer, and its match rule is released when its task is cancelled or the sequence is released.
public struct NameOwnerChanges: AsyncSequence, Sendable {
    public typealias Element = NameOwnerChange
    public typealias Failure = Never

    let signals: DBusSignalStream

    /// Makes the iterator.
    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: signals.makeAsyncIterator())
    }

    /// The iterator of a ``NameOwnerChanges`` sequence.
    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: DBusSignalStream.AsyncIterator

        /// The next change, or nil once the connection has closed.
        public mutating func next() async -> NameOwnerChange? {
            await next(isolation: #isolation)
        }

        /// The next change, or nil once the connection has closed, staying on the caller's actor.
        public mutating func next(isolation actor: isolated (any Actor)?) async -> NameOwnerChange? {
            while let message = await base.next(isolation: actor) {
                if let change = NameOwnerChange(message) { return change }
            }
            return nil
        }
    }
}

@available(*, unavailable)
extension NameOwnerChanges.AsyncIterator: Sendable {}
