// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsModel
@testable import SettingsSync
import SyncProtocol
import Testing
import TestMachine

/// The channel between a broker and its sync process: calls and replies across a socket pair, in pieces or
/// whole, and a peer that sends what is not a message is cut off.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct MessageChannelTests {
    /// Two connected ends.
    static func pair() throws -> (MessageChannel, MessageChannel) {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
            throw POSIXError(.EMFILE)
        }
        return (MessageChannel(descriptor: ends[0], label: "a"), MessageChannel(descriptor: ends[1], label: "b"))
    }

    @Test func aCallLargerThanTheSocketsBufferIsAnsweredAndRepliesFindTheirCallers() async throws {
        let (client, server) = try Self.pair()
        let echo = Task {
            for await call in server.incoming where call.kind == .methodCall {
                server.reply(to: call, call.body)
            }
        }
        // 4 MiB: many writes and reads on each side.
        let large = DBusValue.string(String(repeating: "x", count: 4 << 20))
        async let first = client.call("Echo", [large])
        async let second = client.call("Echo", [.uint32(7)])
        #expect(try await first == [large])
        #expect(try await second == [.uint32(7)])
        client.close()
        await echo.value
        #expect(server.closedReason?.reason == "the peer closed the channel")
    }

    /// A source released while inactive or suspended ends the process in libdispatch: a channel let go while
    /// open must close itself, and its peer then reads the end of the stream.
    @Test func aChannelLetGoWhileOpenClosesAndItsPeerSeesTheEnd() async throws {
        for _ in 0..<50 {
            var ends: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0 else { throw POSIXError(.EMFILE) }
            let peer = MessageChannel(descriptor: ends[1], label: "peer")
            do {
                let channel = MessageChannel(descriptor: ends[0], label: "let go")
                withExtendedLifetime(channel) {}
            }
            for await _ in peer.incoming {}
            #expect(peer.closedReason?.reason == "the peer closed the channel")
        }
    }

    @Test func bytesThatAreNotAMessageCloseTheChannelAndFailTheCallsWaiting() async throws {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0 else { throw POSIXError(.EMFILE) }
        let channel = MessageChannel(descriptor: ends[0], label: "a")
        let waiting = Task { try await channel.call("Hello", [.uint32(1)]) }
        let garbage = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        _ = garbage.withUnsafeBytes { write(ends[1], $0.baseAddress, $0.count) }
        for await _ in channel.incoming {}
        #expect(channel.closedReason?.reason == "the peer sent bytes that are not a D-Bus message")
        await #expect(throws: ChannelClosed.self) { try await waiting.value }
        close(ends[1])
    }

    @Test func aHeaderAnnouncingMoreThanTheLimitClosesTheChannelBeforeAnythingIsRead() async throws {
        var ends: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0 else { throw POSIXError(.EMFILE) }
        let channel = MessageChannel(descriptor: ends[0], label: "a")
        // A little-endian method call whose body is said to be 2 GiB.
        var header: [UInt8] = [UInt8(ascii: "l"), 1, 0, 1, 0, 0, 0, 0x80, 1, 0, 0, 0, 0, 0, 0, 0]
        _ = header.withUnsafeMutableBytes { write(ends[1], $0.baseAddress, $0.count) }
        for await _ in channel.incoming {}
        #expect(channel.closedReason?.reason.contains("more than the channel takes") == true)
        close(ends[1])
    }

    @Test func aPullIsHandedOverInBatchesThatMayEndInsideARevision() throws {
        func row(_ revision: Int64, _ key: String, bytes: Int) throws -> RemoteRow {
            RemoteRow(
                change: SyncChange(
                    key: try SettingPath(key), value: .string(String(repeating: "v", count: bytes)),
                    version: SyncVersion(clock: 1, machine: "m")),
                revision: revision, machineName: "m")
        }
        let big = SyncCall.batchBytes / 2
        // Revision 2 has three rows, the second of which takes a batch past its size: the batch ends after
        // it, inside revision 2, and moves the cursor past revision 1 only; the next ends the page.
        let rows = [
            try row(1, "/a", bytes: 10), try row(2, "/b", bytes: big), try row(2, "/c", bytes: big), try row(2, "/d", bytes: 10),
            try row(3, "/e", bytes: 10),
        ]
        let batches = SyncEngine.batches(of: rows, upTo: 9)
        #expect(batches.map { $0.rows.map(\.change.key.rawValue) } == [["/a", "/b", "/c"], ["/d", "/e"]])
        #expect(batches.map(\.upTo) == [1, 9])
        // A page whose rows were all refused is one empty batch that moves the cursor past them.
        let empty = SyncEngine.batches(of: [], upTo: 4)
        #expect(empty.count == 1 && empty[0].rows.isEmpty && empty[0].upTo == 4)
    }
}
