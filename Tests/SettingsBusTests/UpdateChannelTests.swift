// SPDX-License-Identifier: Apache-2.0

import SettingsBusTesting
import SettingsModel
import Testing

@testable import SettingsBus
import TestMachine

/// The stream between a watch and its consumer: what it keeps, in which order, and how it ends.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct UpdateChannelTests {
    static func update(_ serial: UInt64) -> SettingsUpdate {
        SettingsUpdate(kind: .change, values: [:], removed: [], serial: serial, origin: nil)
    }

    static func serials(of updates: SettingsUpdates, count: Int) async -> [UInt64] {
        var taken: [UInt64] = []
        for await update in updates {
            taken.append(update.serial)
            if taken.count == count { break }
        }
        return taken
    }

    static func element<Element>(_ outcome: Mailbox<Element>.Outcome) -> Element? {
        if case .element(let element) = outcome { return element }
        return nil
    }

    static func ended<Element>(_ outcome: Mailbox<Element>.Outcome) -> Bool {
        if case .ended = outcome { return true }
        return false
    }

    @Test func withoutALimitEveryUpdateArrivesInOrderThenTheEnd() async {
        let channel = UpdateChannel(keepingNewest: nil)
        let updates = SettingsUpdates(channel)
        for serial in 1...100 { channel.yield(Self.update(UInt64(serial))) }
        channel.finish()
        channel.yield(Self.update(101))
        var taken: [UInt64] = []
        for await update in updates { taken.append(update.serial) }
        #expect(taken == Array(1...100))
    }

    @Test func withALimitOnlyTheNewestWait() async {
        let channel = UpdateChannel(keepingNewest: 2)
        let updates = SettingsUpdates(channel)
        for serial in 1...10 { channel.yield(Self.update(UInt64(serial))) }
        #expect(await Self.serials(of: updates, count: 2) == [9, 10])
    }

    @Test func updatesDroppedForNewerOnesAreLetGoWhileNobodyTakes() async {
        let channel = UpdateChannel(keepingNewest: 1)
        let updates = SettingsUpdates(channel)
        for serial in 1...10_000 { channel.yield(Self.update(UInt64(serial))) }
        #expect(channel.heldUpdates <= 64)
        #expect(await Self.serials(of: updates, count: 1) == [10_000])
    }

    @Test func aWaitingConsumerIsResumedByEachUpdate() async {
        let channel = UpdateChannel(keepingNewest: 1)
        let updates = SettingsUpdates(channel)
        let taken = Mailbox<UInt64>()
        let consumer = Task {
            for await update in updates { taken.push(update.serial) }
            taken.finish()
        }
        // Each update is yielded only after the previous one arrived: the consumer waits in between.
        for serial in UInt64(1)...50 {
            channel.yield(Self.update(serial))
            #expect(Self.element(await taken.next(timeLimit: .seconds(10))) == serial)
        }
        updates.stop()
        #expect(Self.ended(await taken.next(timeLimit: .seconds(10))))
        await consumer.value
    }

    @Test func cancellingTheConsumerEndsTheStreamAndTerminatesOnce() async {
        let channel = UpdateChannel(keepingNewest: nil)
        let terminations = Mailbox<Int>()
        channel.setOnTermination { terminations.push(1) }
        let updates = SettingsUpdates(channel)
        let started = Mailbox<Void>()
        let consumer = Task {
            var count = 0
            started.push(())
            for await _ in updates { count += 1 }
            return count
        }
        #expect(Self.element(await started.next(timeLimit: .seconds(10))) != nil)
        consumer.cancel()
        #expect(await consumer.value == 0)
        #expect(Self.element(await terminations.next(timeLimit: .seconds(10))) == 1)
        // Ending again (the hub finishing it, an update after the end) changes nothing.
        channel.finish()
        channel.yield(Self.update(1))
        terminations.finish()
        #expect(Self.ended(await terminations.next(timeLimit: .seconds(10))))
    }

    @Test func releasingTheStreamTerminatesIt() async {
        let channel = UpdateChannel(keepingNewest: 1)
        let terminations = Mailbox<Int>()
        channel.setOnTermination { terminations.push(1) }
        do {
            let updates = SettingsUpdates(channel)
            var iterator = updates.makeAsyncIterator()
            channel.yield(Self.update(7))
            #expect(await iterator.next()?.serial == 7)
        }
        #expect(Self.element(await terminations.next(timeLimit: .seconds(10))) == 1)
        channel.yield(Self.update(8))
        var late = SettingsUpdates(channel).makeAsyncIterator()
        #expect(await late.next() == nil)
    }

    @Test func aHandlerSetAfterTheEndRunsAtOnce() async {
        let channel = UpdateChannel(keepingNewest: nil)
        channel.finish()
        let terminations = Mailbox<Int>()
        channel.setOnTermination { terminations.push(1) }
        #expect(Self.element(await terminations.next(timeLimit: .seconds(10))) == 1)
    }
}
