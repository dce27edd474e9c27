// SPDX-License-Identifier: Apache-2.0

import DBus
import Dispatch
import Glibc

/// A request to stop the broker gracefully, made once (by SIGTERM or SIGINT, or by code) and awaited by the
/// service; a request made before anyone waits is kept.
public final class ShutdownRequest: Sendable {
    private struct State {
        var requested = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state = Locked(State())
    /// The signal sources, kept while the request follows signals.
    private let sources = Locked<[any DispatchSourceSignal]>([])

    public init() {}

    /// Whether the request was made.
    public var isRequested: Bool { state.withLock { $0.requested } }

    /// Asks for the stop; every waiter returns.
    public func request() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.requested = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Makes each of `signals` a request: the signal's default action (ending the process) is turned off and a
    /// handler on a dispatch queue calls ``request()``.
    public func follow(signals: [Int32]) {
        let queue = DispatchQueue(label: "settings-broker-signals")
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [self] in request() }
            source.resume()
            sources.withLock { $0.append(source) }
        }
    }

    /// Returns when the request is made, or when the calling task is cancelled.
    func wait() async {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.requested || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
