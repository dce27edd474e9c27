// SPDX-License-Identifier: Apache-2.0

import DBus
public import SyncProtocol
import Glibc
import SettingsModel

/// The sync process's side of the channel to its broker (``SyncCall``): typed calls, and the broker's
/// `Wake` signals.
public struct BrokerLink: Sendable {
    /// The channel to the broker.
    public let channel: MessageChannel

    /// Takes the channel to the broker.
    public init(channel: MessageChannel) {
        self.channel = channel
    }

    /// What the broker says at the start: the configuration, the store's cursor, and whether it joined.
    public struct Greeting: Sendable {
        public var configuration: SyncConfiguration
        public var cursor: Int64
        public var joined: Bool
    }

    /// Greets the broker on the channel's socket, with blocking calls, before the channel is made (and before
    /// this process has any other thread): the broker answers with the configuration and the store's state of
    /// sync.
    ///
    /// - Throws: ``DBusError`` when the broker refuses (another version of the protocol), ``ChannelClosed``
    ///   when it closes the socket, ``SyncConfigurationError`` when the configuration cannot be read.
    public static func greet(_ descriptor: Int32) throws -> Greeting {
        var call = DBusMessage.methodCall(
            destination: nil, path: MessageChannel.path, interface: nil, member: SyncCall.hello,
            body: [.uint32(SyncCall.version)])
        call.serial = 1
        let bytes = try call.marshalled()
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw ChannelClosed(reason: "the broker's socket cannot be written") }
            sent += count
        }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while received.count < 16 || received.count < (MessageChannel.messageLength(received) ?? 0) {
            if received.count >= 16 {
                guard let length = MessageChannel.messageLength(received), length <= MessageChannel.maximumMessage else {
                    throw ChannelClosed(reason: "the broker sent bytes that are not a D-Bus message")
                }
            }
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { throw ChannelClosed(reason: "the broker closed the channel") }
            received += chunk[..<count]
        }
        let length = MessageChannel.messageLength(received) ?? received.count
        guard received.count == length else { throw ChannelClosed(reason: "the broker sent more than its greeting") }
        let reply = try DBusMessage(marshalled: received)
        guard reply.replySerial == 1 else { throw ChannelClosed(reason: "the broker did not answer Hello") }
        if reply.kind == .error { throw DBusError(reply.errorName ?? .failed, reply.errorMessage) }
        return try greeting(reply.body)
    }

    /// Reads the broker's reply to `Hello`.
    static func greeting(_ reply: [DBusValue]) throws -> Greeting {
        guard reply.count == 3, case .int64(let cursor) = reply[1], case .boolean(let joined) = reply[2] else {
            throw SyncCall.badArguments(SyncCall.hello, "the broker's reply is not (a{sv}xb)")
        }
        return Greeting(configuration: try SyncConfiguration(channelValue: reply[0]), cursor: cursor, joined: joined)
    }

    /// Asks the broker to join: it copies its store aside and queues its values of synced keys.
    func join() async throws -> Int {
        let reply = try await channel.call(SyncCall.join)
        guard reply.count == 1, case .uint32(let count) = reply[0] else { throw SyncCall.badArguments(SyncCall.join, "the reply is not (u)") }
        return Int(count)
    }

    /// The oldest queued changes, at most `limit`.
    func take(limit: Int) async throws -> [SyncChange] {
        let reply = try await channel.call(SyncCall.take, [.uint32(UInt32(clamping: limit))])
        guard reply.count == 1, case .array(_, let changes) = reply[0] else {
            throw SyncCall.badArguments(SyncCall.take, "the reply is not (a(savts))")
        }
        return try changes.map { value throws(SettingsError) in try SyncChange(channelValue: value) }
    }

    /// Tells the broker the database took `pushed`, with the versions it gave them, and, when the push was the
    /// only change after the cursor, the revision the cursor moves to; returns how many changes are left in
    /// the queue.
    func acknowledge(_ pushed: [SyncChange], as versions: [SyncVersion], cursor: Int64?) async throws -> Int {
        let reply = try await channel.call(
            SyncCall.acknowledge,
            [
                .array(SyncChange.channelType, pushed.map(\.channelValue)),
                .array(.structure([.uint64, .string]), versions.map { .structure([.uint64($0.clock), .string($0.machine)]) }),
                .int64(cursor ?? -1),
            ])
        guard reply.count == 1, case .int64(let left) = reply[0] else {
            throw SyncCall.badArguments(SyncCall.acknowledge, "the reply is not (x)")
        }
        return Int(max(0, left))
    }

    /// Hands pulled rows to the broker, with those this process cannot read, and the revision the cursor
    /// moves to once they are applied.
    func apply(_ rows: [RemoteRow], refused: [RefusedRow], upTo last: Int64) async throws {
        _ = try await channel.call(
            SyncCall.apply,
            [
                .array(RemoteRow.channelType, rows.map(\.channelValue)),
                .array(RefusedRow.channelType, refused.map(\.channelValue)), .int64(last),
            ])
    }

    /// Tells the broker the fields of `Status` the sync process keeps.
    func report(_ fields: [String: DBusValue]) {
        var message = DBusMessage.methodCall(
            destination: nil, path: MessageChannel.path, interface: nil, member: SyncCall.report,
            body: [Settings1.ValueMap(fields).dbusValue])
        message.noReplyExpected = true
        _ = try? channel.send(message)
    }
}
