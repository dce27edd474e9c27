// SPDX-License-Identifier: Apache-2.0

import DBus

/// Objects and helpers the DBus tests export and share.
enum Fixtures {
    /// `org.example.Echo1`: `Echo(v) → v`, `Concat(s, s) → s`, `Fail()` throwing a named error, a read-only
    /// `Version` and a read-write `Volume` property. Each received variant is recorded in `received`, and the
    /// name of each method whose handler runs in `calls`.
    static func echoInterface(
        received: Recorder<DBusValue>? = nil, volume: Recorder<DBusValue>? = nil, calls: Recorder<String>? = nil
    ) -> DBusInterface {
        let volumeStore = volume ?? Recorder(initial: [.int32(5)])
        return DBusInterface(
            name: "org.example.Echo1",
            methods: [
                DBusMethod(name: "Echo", inputs: [.init("value", .variant)], outputs: [.init("value", .variant)]) { call in
                    calls?.append("Echo")
                    received?.append(call.arguments[0])
                    return call.arguments
                },
                DBusMethod(
                    name: "Concat", inputs: [.init("a", .string), .init("b", .string)], outputs: [.init("ab", .string)]
                ) { call in
                    calls?.append("Concat")
                    guard case .string(let a) = call.arguments[0], case .string(let b) = call.arguments[1] else { return [] }
                    return [.string(a + b)]
                },
                DBusMethod(name: "Fail") { _ in
                    calls?.append("Fail")
                    throw DBusError("org.example.Echo1.Error.Broken", "it broke on purpose")
                },
            ],
            signals: [DBusSignal(name: "Pinged", arguments: [.init("count", .uint32)])],
            properties: [
                DBusProperty(name: "Version", type: .uint32, changeSignal: .constant) { .uint32(1) },
                DBusProperty(name: "Volume", type: .int32, get: { volumeStore.last ?? .int32(0) }, set: { volumeStore.append($0) }),
            ])
    }

    /// `org.example.Silent1.Wait()`: a method that never answers (its handler waits until cancelled); each
    /// call fires `arrived` when it reaches the handler.
    static func silentInterface(arrived: Signal? = nil) -> DBusInterface {
        DBusInterface(name: "org.example.Silent1", methods: [
            DBusMethod(name: "Wait") { _ in
                arrived?.fire()
                try await Task.sleep(for: .seconds(3600))
                return []
            }
        ])
    }

    /// A one-shot event a test waits for.
    final class Signal: Sendable {
        private let state = Locked<(fired: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

        func fire() {
            let waiters = state.withLock { state in
                state.fired = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }

        func wait() async {
            await withCheckedContinuation { continuation in
                let fired = state.withLock { state in
                    if !state.fired { state.waiters.append(continuation) }
                    return state.fired
                }
                if fired { continuation.resume() }
            }
        }
    }
}

/// A thread-safe list that handlers append to and tests read, or wait on.
final class Recorder<Element: Sendable>: Sendable {
    private struct State {
        var items: [Element]
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    private let state: Locked<State>

    init(initial: [Element] = []) { state = Locked(State(items: initial)) }

    func append(_ item: Element) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.items.append(item)
            let count = state.items.count
            let ready = state.waiters.filter { $0.count <= count }.map(\.continuation)
            state.waiters.removeAll { $0.count <= count }
            return ready
        }
        for waiter in ready { waiter.resume() }
    }

    var all: [Element] { state.withLock { $0.items } }
    var last: Element? { state.withLock { $0.items.last } }

    /// Waits until at least `count` items have been recorded (the suite's time limit bounds the wait).
    func wait(untilCount count: Int) async {
        await withCheckedContinuation { continuation in
            let done = state.withLock { state -> Bool in
                if state.items.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if done { continuation.resume() }
        }
    }
}
