// SPDX-License-Identifier: Apache-2.0

public import Testing
import Foundation
import Synchronization

/// How a suite shares this machine with the other suites of one run.
///
/// `swift test` starts every suite at once. On a machine of two CPUs, a hundred suites that each start a bus, a
/// broker and apps leave a test that bounds a time with nothing left to measure, and tests of minutes run into
/// their time limits. A suite with ``Testing/Trait/sharingTheMachine`` waits, before any of its tests starts,
/// until fewer suites than ``MachineGate/width`` (the CPUs, plus one) run; one with
/// ``Testing/Trait/aloneOnTheMachine`` until no other suite runs, and none starts while it runs. The wait is the
/// suite's, before its tests' own time limits begin. A suite inside one that already holds the machine does not
/// wait again. Suites without either (the unit tests of pure code) run beside the rest.
public struct MachineUse: SuiteTrait, TestScoping {
    /// What a suite takes of the machine.
    public enum Share: Sendable {
        /// One of the gate's places.
        case shared
        /// All of them.
        case alone
    }

    public let share: Share

    public var isRecursive: Bool { false }

    /// The scope of the suite itself, not of each test in it.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> MachineUse? {
        test.isSuite && testCase == nil ? self : nil
    }

    @concurrent public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @concurrent @Sendable () async throws -> Void
    ) async throws {
        if MachineGate.held { return try await function() }
        let places = share == .alone ? MachineGate.run.width : 1
        await MachineGate.run.enter(places)
        do {
            try await MachineGate.$held.withValue(true) { try await function() }
        } catch {
            MachineGate.run.leave(places)
            throw error
        }
        MachineGate.run.leave(places)
    }
}

extension Trait where Self == MachineUse {
    /// The suite takes one of the places of the run's suites (``MachineUse``).
    public static var sharingTheMachine: Self { MachineUse(share: .shared) }
    /// The suite runs with no other suite beside it: it bounds a time, or takes the CPUs and the disk for itself
    /// (``MachineUse``).
    public static var aloneOnTheMachine: Self { MachineUse(share: .alone) }
}

/// The places of the suites that run at once, handed out in the order they were asked for: a suite that waits
/// for all of them is not passed by the ones that ask after it.
public final class MachineGate: Sendable {
    /// The gate of this test run.
    public static let run = MachineGate(width: ProcessInfo.processInfo.activeProcessorCount + 1)

    /// Whether the current task runs inside a suite that holds places.
    @TaskLocal static var held = false

    /// How many places there are.
    public let width: Int

    private struct State {
        var used = 0
        var waiting: [(places: Int, resume: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    init(width: Int) {
        self.width = width
    }

    /// Waits until `places` places are free and no one asked before, and takes them.
    func enter(_ places: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                guard state.waiting.isEmpty, state.used + places <= width else {
                    state.waiting.append((places, continuation))
                    return false
                }
                state.used += places
                return true
            }
            if now { continuation.resume() }
        }
    }

    /// Gives back `places` places, and lets in those waiting that now fit, in order.
    func leave(_ places: Int) {
        let admitted = state.withLock { state in
            state.used -= places
            var admitted: [CheckedContinuation<Void, Never>] = []
            while let first = state.waiting.first, state.used + first.places <= width {
                state.waiting.removeFirst()
                state.used += first.places
                admitted.append(first.resume)
            }
            return admitted
        }
        for continuation in admitted { continuation.resume() }
    }
}
