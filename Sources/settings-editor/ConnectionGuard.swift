// SPDX-License-Identifier: Apache-2.0

import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTPTypes
import Synchronization

/// The bounds on the connections no one has proven to be the user's, so that another user of the machine
/// who opens many and sends nothing, or a request a byte at a time, neither holds them for long nor keeps
/// the user's page from being answered.
///
/// A connection is *proven* once a request on it has carried the session's cookie; until then it is closed:
/// - when it has not been proven within ``proofTime`` of being opened, whatever it sends meanwhile;
/// - when it is the oldest unproven one of its peer address and that address opens one more than
///   ``unprovenPerPeer``;
/// - when it is the oldest unproven one of all and one more than ``unprovenInAll`` is opened (on 127.0.0.1
///   every user's connections come from the same address, so the bound of all is what keeps room for the
///   user's browser: its connection sends its request at once and is proven, while the oldest idle ones
///   make way).
///
/// A proven connection idle between requests is closed by the server's idle timeout (``idleTimeout``),
/// which also bounds the wait for a request's head on it.
final class ConnectionBook: Sendable {
    /// How long a connection has to send a request with the session's cookie.
    static let proofTime = TimeAmount.seconds(10)
    /// How long a connection may wait for its next request, or for the rest of one it began.
    static let idleTimeout = TimeAmount.seconds(30)
    /// The most unproven connections of one peer address.
    static let unprovenPerPeer = 64
    /// The most unproven connections of all.
    static let unprovenInAll = 128

    private struct Entry {
        var channel: any Channel
        var peer: String
        /// The order in which connections were opened.
        var number: UInt64
        var isProven: Bool
    }

    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        var opened: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Records a connection that was opened; returns the connections to close to make room for it.
    func opened(_ channel: any Channel) -> [any Channel] {
        let peer = channel.remoteAddress?.ipAddress ?? "?"
        return state.withLock { state in
            state.opened += 1
            state.entries[ObjectIdentifier(channel)] = Entry(
                channel: channel, peer: peer, number: state.opened, isProven: false)
            var closing: [any Channel] = []
            let unproven = state.entries.values.filter { !$0.isProven }
            let ofPeer = unproven.filter { $0.peer == peer }
            if ofPeer.count > Self.unprovenPerPeer, let oldest = ofPeer.min(by: { $0.number < $1.number }) {
                closing.append(oldest.channel)
                state.entries[ObjectIdentifier(oldest.channel)] = nil
            } else if unproven.count > Self.unprovenInAll, let oldest = unproven.min(by: { $0.number < $1.number }) {
                closing.append(oldest.channel)
                state.entries[ObjectIdentifier(oldest.channel)] = nil
            }
            return closing
        }
    }

    /// Records that a request on the connection carried the session's cookie.
    func proven(_ channel: any Channel) {
        state.withLock { $0.entries[ObjectIdentifier(channel)]?.isProven = true }
    }

    /// Forgets a connection that was closed.
    func closed(_ channel: any Channel) {
        _ = state.withLock { $0.entries.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    /// How many connections are open, and how many of them are unproven.
    var counts: (open: Int, unproven: Int) {
        state.withLock { state in (state.entries.count, state.entries.values.filter { !$0.isProven }.count) }
    }
}

/// The handler on each connection that keeps its entry in the ``ConnectionBook``: it records the connection,
/// closes those the book says make way, proves the connection by the session's cookie and closes it when it
/// is not proven in time.
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let book: ConnectionBook
    private let access: Access
    private var isStarted = false
    private var isProven = false
    private var deadline: Scheduled<Void>?

    init(book: ConnectionBook, access: Access) {
        self.book = book
        self.access = access
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    private func start(_ context: ChannelHandlerContext) {
        guard !isStarted else { return }
        isStarted = true
        let channel = context.channel
        for other in book.opened(channel) { other.close(promise: nil) }
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: ConnectionBook.proofTime) { [self] in
            deadline = nil
            if !isProven { channel.close(promise: nil) }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !isProven, case .head(let head) = unwrapInboundIn(data), access.isSession(cookie(in: head)) {
            isProven = true
            deadline?.cancel()
            deadline = nil
            book.proven(context.channel)
        }
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop(context)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop(context)
    }

    private func stop(_ context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        book.closed(context.channel)
    }

    /// The session cookie's value in a request's `Cookie` fields, if any.
    private func cookie(in head: HTTPRequest) -> String? {
        let name = access.cookieName + "="
        for field in head.headerFields[values: .cookie] {
            for pair in field.split(separator: ";") {
                let pair = pair.drop(while: { $0 == " " || $0 == "\t" })
                if pair.hasPrefix(name) { return String(pair.dropFirst(name.count)) }
            }
        }
        return nil
    }
}
