// SPDX-License-Identifier: Apache-2.0

@testable import SettingsBroker
import Synchronization
import Testing
import TestMachine

/// The rules ``PeerIdentities`` keeps callers by, with a prover that records what it is asked and answers as told
/// (`SandboxedAppTests` runs the real proof in real sandboxes): what bounds a caller's appearance, and what a full
/// table does.
@Suite(.sharingTheMachine) struct PeerIdentitiesTests {
    /// A prover that answers `answer` and records the bound it was given for each pid.
    final class Prover: Sendable {
        let asked = Mutex<[UInt32: UInt64]>([:])
        let answer = Mutex<PeerIdentity>(.host)

        var prove: @Sendable (UInt32, UInt64) -> PeerIdentity {
            { pid, bound in
                self.asked.withLock { $0[pid] = bound }
                return self.answer.withLock { $0 }
            }
        }
    }

    static func app(_ id: String) throws -> PeerIdentity { .app(try AppConfinement.make(appID: id).get()) }

    @Test func aNameThatAppearedBeforeTheFollowingIsBoundedByItsStartNotByItsCall() throws {
        let prover = Prover()
        let peers = PeerIdentities(prove: prover.prove)
        // :1.5 connected while no broker followed names.
        peers.startedFollowing()
        let following = ProcessProof.bootTicks()
        peers.appeared(":1.9")
        // The clock moves on before the early name's first call.
        while ProcessProof.bootTicks() < following + 2 {}
        _ = peers.identity(of: ":1.5", pid: 500)
        let bound = try #require(prover.asked.withLock { $0[500] })
        #expect(bound <= following, "bounded by \(bound), the following took effect by \(following)")
        // A name seen appearing is bounded by its appearance; one later than every name seen (its appearance
        // still on its way) by the moment of its call.
        _ = peers.identity(of: ":1.9", pid: 900)
        #expect(try #require(prover.asked.withLock { $0[900] }) <= following + 1)
        _ = peers.identity(of: ":1.12", pid: 1200)
        #expect(try #require(prover.asked.withLock { $0[1200] }) >= following + 2)
    }

    @Test func aNameNotSeenAppearingIsKeptOnlyIfItsProcessHoldsAConnectionToTheBus() throws {
        let holds = Mutex<[UInt32: Bool]>([1: true, 2: false])
        let checked = Mutex<[UInt32]>([])
        let peers = PeerIdentities(
            prove: { _, _ in .host },
            holdsConnection: { pid, daemon in
                checked.withLock { $0.append(pid) }
                return daemon == 77 ? holds.withLock { $0[pid] } : nil
            },
            countConnections: { pids, _ in Dictionary(uniqueKeysWithValues: pids.map { ($0, 1) }) })
        peers.startedFollowing()
        peers.noteBusDaemon(77)
        peers.noteCensus(claims: [1: 1, 2: 1, 3: 1])
        peers.appeared(":1.50")
        #expect(peers.identity(of: ":1.10", pid: 1) == .host)
        guard case .unproved(let why) = peers.identity(of: ":1.11", pid: 2) else {
            Issue.record("a process that holds no connection to the bus was taken for the caller")
            return
        }
        #expect(why.contains("holds no connection"), "\(why)")
        guard case .unproved(let unknown) = peers.identity(of: ":1.12", pid: 3) else {
            Issue.record("a process whose connections cannot be read was taken for the caller")
            return
        }
        #expect(unknown.contains("cannot be read"), "\(unknown)")
        // A name seen appearing is proved by its start alone.
        #expect(peers.identity(of: ":1.50", pid: 4) == .host)
        #expect(checked.withLock { $0 } == [1, 2, 3])
    }

    /// The census taken when the following began: a process that then held fewer connections to the bus than the
    /// names that claim it took the pid of one of them (a host process that is itself a client of the bus, say),
    /// and none of those names is served as it; nor is a name that was not counted.
    @Test func aNameNotSeenAppearingIsRefusedWhenItsProcessHeldFewerConnectionsThanTheNamesThatClaimIt() throws {
        let counted = Mutex<[Set<UInt32>]>([])
        let peers = PeerIdentities(
            prove: { _, _ in .host },
            holdsConnection: { _, _ in true },
            countConnections: { pids, daemon in
                counted.withLock { $0.append(pids) }
                return daemon == 77 ? [1: 2, 2: 1] : nil
            })
        peers.startedFollowing()
        // Not counted yet (the bus daemon is not known): refused.
        peers.noteCensus(claims: [1: 2])
        guard case .unproved(let uncounted) = peers.identity(of: ":1.9", pid: 1) else {
            Issue.record("a name that was not counted was served")
            return
        }
        #expect(uncounted.contains("was not counted"), "\(uncounted)")
        peers.left(":1.9")
        peers.noteBusDaemon(77)
        // Process 1 made two connections and holds both; process 2 holds one, and two names claim it.
        peers.noteCensus(claims: [1: 2, 2: 2])
        #expect(counted.withLock { $0 } == [[1, 2]])
        #expect(peers.identity(of: ":1.10", pid: 1) == .host)
        #expect(peers.identity(of: ":1.11", pid: 1) == .host)
        guard case .unproved(let why) = peers.identity(of: ":1.12", pid: 2) else {
            Issue.record("a name whose process held fewer connections than the names that claim it was served")
            return
        }
        #expect(why.contains("held fewer connections"), "\(why)")
        guard case .unproved(let other) = peers.identity(of: ":1.13", pid: 3) else {
            Issue.record("a process not counted was served")
            return
        }
        #expect(other.contains("was not counted"), "\(other)")
        // A name seen appearing is proved by its start alone.
        peers.appeared(":1.50")
        #expect(peers.identity(of: ":1.50", pid: 2) == .host)
    }

    @Test func aFullTableKeepsWhatItProvedAndRefusesTheCallerItCannotKeep() throws {
        let prover = Prover()
        let peers = PeerIdentities(limit: 4, prove: prover.prove)
        peers.startedFollowing()
        let editor = try Self.app("org.example.Editor")
        prover.answer.withLock { $0 = editor }
        peers.appeared(":1.10")
        #expect(peers.identity(of: ":1.10", pid: 10) == editor)
        // Other callers fill every table.
        prover.answer.withLock { $0 = .host }
        for number in 11...20 {
            peers.appeared(":1.\(number)")
            _ = peers.identity(of: ":1.\(number)", pid: UInt32(number))
        }
        // The app identified first is still known as itself, though its process may be gone by now: it is never
        // asked again, and so never served as the host its pid may come to name.
        prover.asked.withLock { $0[10] = nil }
        #expect(peers.identity(of: ":1.10", pid: 10) == editor)
        #expect(prover.asked.withLock { $0[10] } == nil)
        // A caller that cannot be kept is refused, not promoted; one whose appearance could not be kept too.
        guard case .unproved(let why) = peers.identity(of: ":1.14", pid: 14) else {
            Issue.record("a caller the full table cannot keep was served")
            return
        }
        #expect(why.contains("already keeps"), "\(why)")
        // When a name leaves, its places are free again for a name that appears next.
        peers.left(":1.11")
        peers.appeared(":1.21")
        #expect(peers.identity(of: ":1.21", pid: 21) == .host)
    }

    @Test func aNameWhoseAppearanceCouldNotBeKeptIsRefused() throws {
        let prover = Prover()
        let peers = PeerIdentities(limit: 2, prove: prover.prove)
        peers.startedFollowing()
        for number in 1...5 { peers.appeared(":1.\(number)") }
        // :1.3 to :1.5 appeared while the broker followed, but the table kept only two.
        guard case .unproved(let why) = peers.identity(of: ":1.4", pid: 4) else {
            Issue.record("a caller whose appearance was not kept was proved")
            return
        }
        #expect(why.contains("could not keep its appearance"), "\(why)")
        #expect(prover.asked.withLock { $0[4] } == nil)
    }

    @Test func aListenerThatCannotBeKeptIsRefused() throws {
        let peers = PeerIdentities(limit: 2)
        let app = try AppConfinement.make(appID: "org.example.Editor").get()
        #expect(peers.listen(":1.1", as: app))
        #expect(peers.listen(":1.2", as: app))
        #expect(!peers.listen(":1.3", as: app))
        // A listener already kept stays kept; one that leaves makes room.
        #expect(peers.listen(":1.1", as: app))
        #expect(peers.listeners.count == 2)
        peers.left(":1.1")
        #expect(peers.listen(":1.3", as: app))
    }
}
