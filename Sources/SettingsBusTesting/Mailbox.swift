// SPDX-License-Identifier: Apache-2.0

import DBus

/// Elements queued by a producer (a thread or a task) for consumers that wait with a time limit.
///
/// Tests wait for what happens — a line of output, a change — rather than sleeping: ``next(timeLimit:)``
/// returns as soon as an element is there, or reports the timeout.
public final class Mailbox<Element: Sendable>: Sendable {
    /// What ``next(timeLimit:)`` found.
    public enum Outcome: Sendable {
        /// The next element.
        case element(Element)
        /// The producer finished and every element was taken.
        case ended
        /// No element arrived in time.
        case timedOut
    }

    private struct State {
        var elements: [Element] = []
        var ended = false
        var nextID: UInt64 = 0
        /// Timers that fired before their waiter was queued.
        var expired: Set<UInt64> = []
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Outcome, Never>)] = []
    }

    private let state = Locked(State())

    /// Makes an empty mailbox.
    public init() {}

    /// Queues an element, or hands it to the longest-waiting consumer.
    public func push(_ element: Element) {
        let waiter = state.withLock { state -> CheckedContinuation<Outcome, Never>? in
            guard state.waiters.isEmpty else { return state.waiters.removeFirst().continuation }
            state.elements.append(element)
            return nil
        }
        waiter?.resume(returning: .element(element))
    }

    /// Marks the end: consumers get ``Outcome/ended`` once the queue is empty.
    public func finish() {
        let waiters = state.withLock { state in
            state.ended = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume(returning: .ended) }
    }

    private func expire(_ id: UInt64) {
        let waiter = state.withLock { state -> CheckedContinuation<Outcome, Never>? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                state.expired.insert(id)
                return nil
            }
            return state.waiters.remove(at: index).continuation
        }
        waiter?.resume(returning: .timedOut)
    }

    /// The next element, ``Outcome/ended`` after the last one, or ``Outcome/timedOut`` when none arrives
    /// within `timeLimit`.
    public func next(timeLimit: Duration) async -> Outcome {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        let timer = Task { [self] in
            do { try await Task.sleep(for: timeLimit) } catch { return }
            expire(id)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Outcome? in
                if !state.elements.isEmpty { return .element(state.elements.removeFirst()) }
                if state.ended { return .ended }
                if state.expired.remove(id) != nil { return .timedOut }
                state.waiters.append((id, continuation))
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

/// The elements of an `AsyncSequence`, consumed by a task of their own and taken one at a time with a time
/// limit.
///
/// ```swift
/// let values = Collector(settings.values(for: .theme))
/// #expect(try await values.next() == .light)
/// values.stop()
/// ```
public final class Collector<Element: Sendable>: Sendable {
    private let mailbox = Mailbox<Element>()
    private let task: Task<Void, Never>

    /// Starts consuming a sequence.
    public init<Sequence: AsyncSequence & Sendable>(_ sequence: Sequence)
    where Sequence.Element == Element, Sequence.Failure == Never {
        let mailbox = self.mailbox
        task = Task {
            for await element in sequence { mailbox.push(element) }
            mailbox.finish()
        }
    }

    /// The next element.
    ///
    /// - Throws: ``TestProcess/Failure`` when the sequence ends, or nothing arrives within `timeLimit`.
    public func next(timeLimit: Duration = .seconds(20)) async throws -> Element {
        switch await mailbox.next(timeLimit: timeLimit) {
        case .element(let element): return element
        case .ended: throw TestProcess.Failure(description: "the sequence ended")
        case .timedOut: throw TestProcess.Failure(description: "nothing arrived within \(timeLimit)")
        }
    }

    /// The next element that satisfies `predicate`, skipping the others.
    ///
    /// - Throws: as ``next(timeLimit:)``.
    public func next(
        where predicate: (Element) -> Bool, timeLimit: Duration = .seconds(20)
    ) async throws -> Element {
        let deadline = ContinuousClock.now + timeLimit
        while true {
            let element = try await next(timeLimit: max(.zero, deadline - ContinuousClock.now))
            if predicate(element) { return element }
        }
    }

    /// Whether the sequence has ended within `timeLimit` (after every queued element is taken).
    public func ends(within timeLimit: Duration = .seconds(20)) async -> Bool {
        while true {
            switch await mailbox.next(timeLimit: timeLimit) {
            case .element: continue
            case .ended: return true
            case .timedOut: return false
            }
        }
    }

    /// Stops consuming (cancels the consuming task, which ends the sequence's subscription).
    public func stop() {
        task.cancel()
    }

    deinit {
        task.cancel()
    }
}
