// SPDX-License-Identifier: Apache-2.0

import DBus
public import SettingsModel

/// Whether a store reaches its broker (``SettingsStore/connectionStatus``).
///
/// ```swift
/// for await status in settings.connectionStatuses() {
///     if case .unavailable(let error) = status { banner.show(error.message) } else { banner.hide() }
/// }
/// ```
public enum ConnectionStatus: Sendable, Hashable {
    /// Nothing is known yet: the store has not asked the broker anything.
    case connecting
    /// The broker answered the store's last call, and its bus name has an owner.
    case connected
    /// The broker cannot be reached: no bus, or no broker owns its name and none could be started by D-Bus
    /// activation (`BrokerUnavailable`), or the connection was lost or closed (`Disconnected`). The store
    /// goes on trying; its streams carry the local copy or the defaults meanwhile.
    case unavailable(SettingsError)
}

/// The connection status of a ``BusSettingsStore``: the current one, and the streams that follow it.
///
/// The link sets it from what its calls find; the watches from the broker's name losing its owner. While
/// at least one stream follows it, a task follows the broker's name (``follower``), so that a broker started
/// later is noticed even when nothing else calls.
final class StatusBoard: Sendable {
    private struct State {
        var status: ConnectionStatus = .connecting
        var subscribers: [UInt64: AsyncStream<ConnectionStatus>.Continuation] = [:]
        var nextID: UInt64 = 0
        var follower: Task<Void, Never>?
    }

    private let state = Locked(State())

    var current: ConnectionStatus {
        state.withLock { $0.status }
    }

    /// Records a status; the streams hear of it when it differs from the current one (errors compare by code).
    func set(_ status: ConnectionStatus) {
        state.withLock { state in
            guard state.status != status else { return }
            state.status = status
            for subscriber in state.subscribers.values { subscriber.yield(status) }
        }
    }

    /// Records that a call was answered by the broker: the common case costs one uncontended lock.
    func answered() {
        state.withLock { state in
            if case .connected = state.status { return }
            state.status = .connected
            for subscriber in state.subscribers.values { subscriber.yield(.connected) }
        }
    }

    /// The current status, then each change; the first stream starts `follow`, the last one to end cancels it.
    func statuses(following follow: @escaping @Sendable () async -> Void) -> AsyncStream<ConnectionStatus> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: ConnectionStatus.self, bufferingPolicy: .bufferingNewest(8))
        let id = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = continuation
            continuation.yield(state.status)
            if state.follower == nil { state.follower = Task { await follow() } }
            return id
        }
        continuation.onTermination = { [weak self] _ in
            let follower: Task<Void, Never>? = self?.state.withLock { state in
                state.subscribers[id] = nil
                guard state.subscribers.isEmpty else { return nil }
                defer { state.follower = nil }
                return state.follower
            }
            follower?.cancel()
        }
        return stream
    }

    /// Ends every stream (the store was closed).
    func finish() {
        let (subscribers, follower) = state.withLock { state in
            defer {
                state.subscribers = [:]
                state.follower = nil
            }
            return (Array(state.subscribers.values), state.follower)
        }
        follower?.cancel()
        for subscriber in subscribers { subscriber.finish() }
    }
}
