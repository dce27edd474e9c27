// SPDX-License-Identifier: Apache-2.0

import Glibc

/// A value protected by a `pthread_mutex_t`, with the interface of `Synchronization.Mutex`.
///
/// The package uses it instead of `Mutex` because ThreadSanitizer sees the ordering a pthread mutex creates,
/// and does not see the futex-based `Mutex` of the Swift 6.3 toolchain on Linux: with `Mutex`,
/// `swift test --sanitize=thread` reports every properly locked access as a race.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is read and written only inside `withLock`, between
    // pthread_mutex_lock and pthread_mutex_unlock on `mutex`, which is allocated once and never moved.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // Visible to inlined code, with `lock()` and `unlock()`, so that other modules inline and specialize
    // `withLock` instead of calling the generic function, which works through its types' metadata at run time.
    @usableFromInline var value: Value

    /// Makes a lock around an initial value.
    package init(_ initial: Value) {
        value = initial
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    ///
    /// - Important: `body` must not call `withLock` on the same lock (it would deadlock), and should not
    ///   block or suspend.
    @inlinable @inline(__always)
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body(&value)
    }

    @usableFromInline func lock() {
        pthread_mutex_lock(mutex)
    }

    @usableFromInline func unlock() {
        pthread_mutex_unlock(mutex)
    }
}

/// Waits for a value that another thread delivers, passing it through a ``Locked`` slot.
///
/// A continuation alone orders the deliverer's writes before the waiter's reads, but through the concurrency
/// runtime's own synchronization, which ThreadSanitizer does not see; passing the value through a pthread
/// mutex as well makes that ordering visible to it, for the cost of one uncontended lock.
///
/// - Parameter start: starts the work and calls `deliver` exactly once, from any thread.
package func handOff<Value: Sendable>(
    _ start: (_ deliver: @escaping @Sendable (Value) -> Void) -> Void
) async -> Value {
    let slot = Locked<Value?>(nil)
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        start { value in
            slot.withLock { $0 = value }
            continuation.resume()
        }
    }
    return slot.withLock { $0.take()! }
}
