// SPDX-License-Identifier: Apache-2.0

public import DBus
import Dispatch
import Glibc

/// One end of a private channel between two processes: D-Bus messages in the wire format, one after the
/// other on a stream socket (a socket pair, or a unix socket), with no bus in between.
///
/// Nothing received is trusted: each message is read by libdbus, which checks every byte
/// (``DBusMessage/init(marshalled:)``); bytes that are not a message, or a message longer than
/// ``maximumMessage``, close the channel. Replies to ``call(_:_:)`` go to their caller; every other message
/// goes to ``incoming``, in the order it came. Reading and writing happen on a dispatch queue of the channel's
/// own, on a non-blocking socket: no task waits inside a system call.
public final class MessageChannel: Sendable {
    /// The longest message either end takes: the D-Bus limit on a message.
    public static let maximumMessage = 128 << 20

    /// The calls, signals and errors the peer sent, other than replies; finished when the channel closes.
    public let incoming: AsyncStream<DBusMessage>
    private let continuation: AsyncStream<DBusMessage>.Continuation
    private let descriptor: Int32
    private let queue: DispatchQueue
    private let state = Locked(State())

    private struct State {
        var inbound: [UInt8] = []
        var outbound: [UInt8] = []
        var written = 0
        var nextSerial: UInt32 = 1
        var calls: [UInt32: CheckedContinuation<DBusMessage, any Error>] = [:]
        var reading: (any DispatchSourceRead)?
        var writing: (any DispatchSourceWrite)?
        var writingResumed = false
        var closed: ChannelClosed?
    }

    /// Takes over a connected stream socket, which the channel makes non-blocking and closes when it closes.
    ///
    /// - Parameter label: the name of the channel's dispatch queue.
    public init(descriptor: Int32, label: String) {
        self.descriptor = descriptor
        self.queue = DispatchQueue(label: label)
        (incoming, continuation) = AsyncStream.makeStream(of: DBusMessage.self)
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
        let reading = DispatchSource.makeReadSource(fileDescriptor: descriptor, queue: queue)
        let writing = DispatchSource.makeWriteSource(fileDescriptor: descriptor, queue: queue)
        reading.setEventHandler { [weak self] in self?.readAvailable() }
        writing.setEventHandler { [weak self] in self?.flush() }
        // The descriptor is closed once both sources are done with it.
        let group = DispatchGroup()
        group.enter()
        group.enter()
        reading.setCancelHandler { group.leave() }
        writing.setCancelHandler { group.leave() }
        group.notify(queue: queue) { _ = Glibc.close(descriptor) }
        state.withLock {
            $0.reading = reading
            $0.writing = writing
        }
        reading.resume()
    }

    /// A channel let go while open is closed: libdispatch ends the process when a source is released while it
    /// is inactive or suspended (as the write source is while nothing waits to be written), and closing resumes
    /// and cancels both.
    deinit {
        close("the channel was let go")
    }

    /// Why the channel closed, nil while it is open.
    public var closedReason: ChannelClosed? { state.withLock { $0.closed } }

    /// Sends a message; a message with serial 0 is given the next serial. Returns the serial it was sent with.
    ///
    /// - Throws: ``ChannelClosed`` once the channel is closed; ``DBusError`` when the message cannot be
    ///   marshalled (an invalid field or argument) or is longer than ``maximumMessage``.
    @discardableResult
    public func send(_ message: DBusMessage) throws -> UInt32 {
        var message = message
        let serial = try state.withLock { state throws(ChannelClosed) -> UInt32 in
            if let closed = state.closed { throw closed }
            if message.serial == 0 { message.serial = Self.takeSerial(&state) }
            return message.serial
        }
        let bytes = try message.marshalled()
        guard bytes.count <= Self.maximumMessage else {
            throw DBusError(.invalidArgs, "a message of \(bytes.count) bytes is longer than the channel takes")
        }
        try state.withLock { state throws(ChannelClosed) in
            if let closed = state.closed { throw closed }
            state.outbound += bytes
        }
        queue.async { [weak self] in self?.flush() }
        return serial
    }

    /// The next serial (never 0: the wire format has none).
    private static func takeSerial(_ state: inout State) -> UInt32 {
        defer { state.nextSerial = state.nextSerial == UInt32.max ? 1 : state.nextSerial + 1 }
        return state.nextSerial
    }

    /// Calls a method of the peer and waits for its reply.
    ///
    /// - Returns: the reply's arguments.
    /// - Throws: ``DBusError`` with the peer's error name and text when it answers with an error; ``ChannelClosed``
    ///   when the channel closes first.
    public func call(_ member: MemberName, _ body: [DBusValue] = []) async throws -> [DBusValue] {
        var message = DBusMessage.methodCall(
            destination: nil, path: Self.path, interface: nil, member: member, body: body)
        message.serial = state.withLock { Self.takeSerial(&$0) }
        let serial = message.serial
        let reply = try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<DBusMessage, any Error>) in
            let closed = state.withLock { state -> ChannelClosed? in
                if let closed = state.closed { return closed }
                state.calls[serial] = waiter
                return nil
            }
            if let closed { return waiter.resume(throwing: closed) }
            do {
                try send(message)
            } catch {
                if let waiter = state.withLock({ $0.calls.removeValue(forKey: serial) }) { waiter.resume(throwing: error) }
            }
        }
        if reply.kind == .error {
            throw DBusError(reply.errorName ?? .failed, reply.errorMessage)
        }
        return reply.body
    }

    /// Answers a call received in ``incoming``; an answer to a call that expects none is not sent.
    public func reply(to call: DBusMessage, _ body: [DBusValue] = []) {
        guard !call.noReplyExpected else { return }
        _ = try? send(.methodReturn(to: call, body: body))
    }

    /// Answers a call received in ``incoming`` with an error.
    public func reply(to call: DBusMessage, error: DBusError) {
        guard !call.noReplyExpected else { return }
        _ = try? send(.error(replyingTo: call, error))
    }

    /// Sends a signal (no reply).
    public func signal(_ member: MemberName, _ body: [DBusValue] = []) {
        _ = try? send(.signal(path: Self.path, interface: Self.interface, member: member, body: body))
    }

    /// The object path of the channel's messages: the channel has one object.
    public static let path: ObjectPath = "/io/github/settingsbus/Sync1"
    /// The interface of the channel's signals.
    public static let interface: InterfaceName = "io.github.settingsbus.Sync1"

    /// Closes the channel: the calls waiting fail with ``ChannelClosed``, ``incoming`` finishes, and the
    /// socket is closed (the peer reads its end). Closing again does nothing.
    public func close(_ reason: String = "the channel was closed") {
        let (calls, reading, writing) = state.withLock { state -> ([CheckedContinuation<DBusMessage, any Error>], (any DispatchSourceRead)?, (any DispatchSourceWrite)?) in
            guard state.closed == nil else { return ([], nil, nil) }
            state.closed = ChannelClosed(reason: reason)
            defer {
                state.calls = [:]
                state.reading = nil
                state.writing = nil
            }
            if !state.writingResumed { state.writing?.resume() }
            state.writingResumed = true
            return (Array(state.calls.values), state.reading, state.writing)
        }
        guard let reading, let writing else { return }
        reading.cancel()
        writing.cancel()
        continuation.finish()
        for call in calls { call.resume(throwing: ChannelClosed(reason: reason)) }
    }

    // MARK: - On the queue

    private func readAvailable() {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                state.withLock { $0.inbound += chunk[..<count] }
                guard deliverWhole() else { return }
                continue
            }
            if count == 0 { return close("the peer closed the channel") }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            return close("the channel cannot be read: \(String(cString: strerror(errno)))")
        }
    }

    /// Delivers every whole message received; false when the channel closed.
    private func deliverWhole() -> Bool {
        while true {
            let next = state.withLock { state -> Result<[UInt8]?, ChannelClosed> in
                guard state.inbound.count >= 16 else { return .success(nil) }
                guard let length = Self.messageLength(state.inbound) else {
                    return .failure(ChannelClosed(reason: "the peer sent bytes that are not a D-Bus message"))
                }
                guard length <= Self.maximumMessage else {
                    return .failure(ChannelClosed(reason: "the peer sent a message of \(length) bytes, more than the channel takes"))
                }
                guard state.inbound.count >= length else { return .success(nil) }
                let bytes = Array(state.inbound[..<length])
                state.inbound.removeFirst(length)
                return .success(bytes)
            }
            switch next {
            case .failure(let closed):
                close(closed.reason)
                return false
            case .success(nil):
                return true
            case .success(let bytes?):
                let message: DBusMessage
                do {
                    message = try DBusMessage(marshalled: bytes)
                } catch {
                    close("the peer sent a message that is not valid: \(error.message)")
                    return false
                }
                deliver(message)
            }
        }
    }

    private func deliver(_ message: DBusMessage) {
        if message.kind == .methodReturn || message.kind == .error, let serial = message.replySerial {
            if let waiter = state.withLock({ $0.calls.removeValue(forKey: serial) }) {
                waiter.resume(returning: message)
            }
            return
        }
        continuation.yield(message)
    }

    /// The whole length of the message whose fixed header starts `bytes`: the header, its fields padded to 8,
    /// and the body; nil when the bytes do not start a message of either byte order.
    public static func messageLength(_ bytes: [UInt8]) -> Int? {
        let little: Bool
        switch bytes[0] {
        case UInt8(ascii: "l"): little = true
        case UInt8(ascii: "B"): little = false
        default: return nil
        }
        func number(at offset: Int) -> Int {
            let field = bytes[offset..<offset + 4]
            return (little ? field.reversed() : Array(field)).reduce(0) { $0 << 8 | Int($1) }
        }
        let fields = number(at: 12)
        return 16 + ((fields + 7) & ~7) + number(at: 4)
    }

    private func flush() {
        while true {
            let pending = state.withLock { state -> Bool in
                if state.written > 0 && state.written == state.outbound.count {
                    state.outbound.removeAll(keepingCapacity: state.outbound.count < 1 << 20)
                    state.written = 0
                }
                return state.closed == nil && state.written < state.outbound.count
            }
            guard pending else { return setWriting(false) }
            let count = state.withLock { state in
                state.outbound.withUnsafeBytes { bytes in
                    Glibc.send(descriptor, bytes.baseAddress! + state.written, bytes.count - state.written, Int32(MSG_NOSIGNAL))
                }
            }
            if count > 0 {
                state.withLock { $0.written += count }
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return setWriting(true) }
            return close("the channel cannot be written: \(String(cString: strerror(errno)))")
        }
    }

    /// Resumes the write source while bytes wait for room in the socket, and suspends it once they are out.
    private func setWriting(_ on: Bool) {
        state.withLock { state in
            guard state.closed == nil, state.writingResumed != on, let writing = state.writing else { return }
            state.writingResumed = on
            if on { writing.resume() } else { writing.suspend() }
        }
    }
}

/// The channel is closed, and why.
public struct ChannelClosed: Error, Sendable, CustomStringConvertible {
    /// Why it closed, for people.
    public var reason: String
    public var description: String { reason }

    /// Makes the error.
    public init(reason: String) { self.reason = reason }
}
