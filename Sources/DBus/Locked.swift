// SPDX-License-Identifier: Apache-2.0

import Glibc

/// A value protected by a `pthread_mutex_t`, with the interface of `Synchronization.Mutex`.
///
/// The package uses it instead of `Mutex` because ThreadSanitizer sees the ordering a pthread mutex creates,
/// and does not see the futex-based `Mutex` of the Swift 6.3 toolchain on Linux: with `Mutex`,
/// `swift test --sanitize=thread` reports every properly locked access as a race.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: the value is read and written only inside `withLock`, between
    // pthread_mutex_lock and pthread_mutex_unlock on `mutex`; both sit in one allocation, made once and never
    // moved.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // The value lives beside the mutex, outside the object: the mutex makes access to it exclusive, and a
    // stored property would have that checked again at run time on every access (Swift's dynamic exclusivity
    // enforcement). Visible to inlined code, with `lock()` and `unlock()`, so that other modules inline and
    // specialize `withLock` instead of calling the generic function, which works through its types' metadata
    // at run time.
    @usableFromInline let value: UnsafeMutablePointer<Value>

    /// Makes a lock around an initial value.
    package init(_ initial: Value) {
        let alignment = MemoryLayout<Value>.alignment
        let offset = (MemoryLayout<pthread_mutex_t>.stride + alignment - 1) / alignment * alignment
        let memory = UnsafeMutableRawPointer.allocate(
            byteCount: offset + MemoryLayout<Value>.size,
            alignment: max(MemoryLayout<pthread_mutex_t>.alignment, alignment))
        mutex = memory.bindMemory(to: pthread_mutex_t.self, capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        value = (memory + offset).bindMemory(to: Value.self, capacity: 1)
        value.initialize(to: initial)
    }

    deinit {
        value.deinitialize(count: 1)
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        UnsafeMutableRawPointer(mutex).deallocate()
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
        return try body(&value.pointee)
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
