// SPDX-License-Identifier: Apache-2.0

public import DBus
import Glibc
public import Logging
import SettingsModel
public import SyncProtocol

/// Sync across machines as the broker does it: the store's side of sync, with the database in another
/// process (docs/sync.md; decision 0030).
///
/// The broker holds the data and never speaks to the network. The sync process (`settings-sync`) holds the
/// database's connection and password and nothing of the store: it is started by the broker with one end of a
/// socket pair (``SyncProcess/start(_:)``), or, under systemd, started by its own socket unit and reached at
/// its socket (``SyncProcess/connect(_:)``). It calls the broker through ``SyncCall``: to take the changes
/// queued by commits, acknowledge what the database took, and hand over what it pulled. The broker decides
/// here what only the store can: which keys sync (``SyncSettings/syncs(_:schema:)``), the per-key versions and
/// the check against local writes made meanwhile (``RemoteChanges``), and the schemas and locks that refuse a
/// remote value (the store's own validation of the commit).
///
/// Nothing the sync process sends is trusted: every argument is read as its type, every key as a key and
/// every value by the store's rules; a row this machine would not push itself is refused and listed in
/// `Status`. A sync process that ends, or breaks the protocol, is started again after a growing wait; local
/// service never waits for it.
public final class SyncLink: StoreSync {
    let configuration: SyncConfiguration
    let process: SyncProcess
    let logger: Logger
    let clock: HybridLogicalClock
    let state = Locked(State())
    private let task = Locked<Task<Void, Never>?>(nil)

    struct State {
        var store: DurableStore?
        var channel: MessageChannel?
        /// The fields the sync process reported last (``SyncStatusField``), or the broker's own when it is not
        /// running.
        var reported: [String: DBusValue] = [SyncStatusField.state: .string("starting")]
        var cursor: Int64 = 0
        var queued = 0
        /// Whether a recount of the queue for `Status` is on its way.
        var recounting = false
        /// Remote changes this machine refused, by key as the database spells it, the latest last:
        /// `key from machine: reason`. A later remote change of the key that is applied takes its key off.
        var refused: [(key: String, text: String)] = []
    }

    /// Makes the link; nothing happens before the broker calls ``start(writes:)``.
    public init(configuration: SyncConfiguration, process: SyncProcess, logger: Logger) {
        self.configuration = configuration
        self.process = process
        self.logger = logger
        self.clock = HybridLogicalClock(offsetMilliseconds: configuration.clockOffsetMilliseconds)
    }

    public func start(writes: WritePath) async {
        let store = writes.store
        store.enableSync(
            SyncSettings(
                directories: configuration.directories, machine: configuration.machineID, clock: clock,
                queued: { [weak self] in self?.noteQueued(store) }))
        if let recorded = try? await store.largestSyncClock() { clock.observe(recorded) }
        let cursor = (try? await store.syncState("cursor")) ?? 0
        let queued = (try? await store.queuedSyncCount()) ?? 0
        state.withLock {
            $0.store = store
            $0.cursor = cursor
            $0.queued = queued
        }
        let running = Task { await self.supervise(writes) }
        task.withLock { $0 = running }
    }

    public func stop() async {
        let running = task.withLock { task in
            defer { task = nil }
            return task
        }
        running?.cancel()
        state.withLock { $0.channel }?.close("the broker is stopping")
        await running?.value
    }

    public func status() -> [String: DBusValue] {
        state.withLock { state in
            var fields = state.reported
            fields["sync-queued"] = .uint64(UInt64(max(0, state.queued)))
            fields["sync-cursor"] = .int64(state.cursor)
            fields["sync-machine"] = .string(configuration.machineName)
            fields["sync-database"] = .string(configuration.database.description)
            if !state.refused.isEmpty {
                fields["sync-refused"] = .array(.string, state.refused.map { .string($0.text) })
            }
            return fields
        }
    }

    // MARK: - The sync process

    /// Starts the sync process (or reaches it), serves it until its channel closes, and starts it again after
    /// a growing wait, until the broker stops.
    private func supervise(_ writes: WritePath) async {
        var failures = 0
        while !Task.isCancelled {
            let began = ContinuousClock.now
            var problem: String
            do throws(SyncProcess.Failure) {
                let running = try process.open()
                state.withLock { $0.channel = running.channel }
                if Task.isCancelled { running.channel.close("the broker is stopping") }
                await serve(running.channel, writes)
                state.withLock { $0.channel = nil }
                let reason = running.channel.closedReason?.reason ?? "the channel closed"
                let ending = await running.end()
                if Task.isCancelled { break }
                problem = "the sync process stopped (\(reason)\(ending.map { "; it \($0)" } ?? ""))"
            } catch {
                problem = error.description
            }
            // A process that ran a while and then stopped is started again at once, the second time.
            failures = ContinuousClock.now - began > .seconds(30) ? 0 : failures + 1
            let wait = Self.retryDelay(after: failures)
            logger.warning(
                "sync: the sync process is not running; it is started again soon; local service goes on",
                metadata: ["error": "\(problem)", "retry-in": "\(wait)"])
            state.withLock {
                $0.reported = [SyncStatusField.state: .string("error"), SyncStatusField.error: .string(problem)]
            }
            do { try await Task.sleep(for: wait) } catch { break }
        }
        state.withLock { $0.reported[SyncStatusField.state] = .string("stopped") }
    }

    /// The wait before start `failures + 1` of the sync process: 0.5 s doubled each time, up to 30 s.
    static func retryDelay(after failures: Int) -> Duration {
        .milliseconds(min(500 << min(max(failures - 1, 0), 10), 30_000))
    }

    /// Answers the sync process's calls, one at a time, until the channel closes. A call that breaks the
    /// protocol (unknown, out of order, arguments of the wrong type) is answered with an error; the process
    /// gets no second chance to break it, and its channel is closed.
    private func serve(_ channel: MessageChannel, _ writes: WritePath) async {
        var greeted = false
        for await message in channel.incoming {
            // Calls left on a channel that closed are dropped: no one reads their answers.
            if channel.closedReason != nil { break }
            guard message.kind == .methodCall, let member = message.member else { continue }
            do {
                guard greeted || member == SyncCall.hello else {
                    throw SyncCall.badArguments(member, "the sync process must call Hello first")
                }
                let reply = try await answer(member, message.body, writes, channel)
                greeted = true
                channel.reply(to: message, reply)
            } catch let error as SettingsError {
                channel.reply(to: message, error: error.dbusError)
                if error.code == .storeFailure { continue }
                channel.close("the sync process sent what the broker refuses: \(error.message)")
            } catch let error as DBusError {
                channel.reply(to: message, error: error)
                channel.close("the sync process broke the protocol: \(error.message)")
            } catch {
                channel.reply(to: message, error: DBusError(.failed, "\(error)"))
            }
        }
    }

    private func answer(
        _ member: MemberName, _ body: [DBusValue], _ writes: WritePath, _ channel: MessageChannel
    ) async throws -> [DBusValue] {
        let store = writes.store
        switch member {
        case SyncCall.hello:
            guard body.count == 1, case .uint32(let version) = body[0] else { throw SyncCall.badArguments(member, "takes (u)") }
            guard version == SyncCall.version else {
                throw SyncCall.badArguments(
                    member, "the sync process speaks version \(version) of the protocol; this broker speaks \(SyncCall.version)")
            }
            let cursor = try await store.syncState("cursor") ?? 0
            let joined = try await store.syncState("joined") != nil
            state.withLock { $0.cursor = cursor }
            return [configuration.channelValue, .int64(cursor), .boolean(joined)]
        case SyncCall.join:
            guard body.isEmpty else { throw SyncCall.badArguments(member, "takes no arguments") }
            return [.uint32(UInt32(clamping: try await join(writes)))]
        case SyncCall.take:
            guard body.count == 1, case .uint32(let limit) = body[0] else { throw SyncCall.badArguments(member, "takes (u)") }
            return [.array(SyncChange.channelType, try await take(limit: Int(min(limit, 1000)), writes, for: channel).map(\.channelValue))]
        case SyncCall.acknowledge:
            guard body.count == 3, case .array(_, let pushed) = body[0], case .array(_, let versions) = body[1],
                pushed.count == versions.count, case .int64(let cursor) = body[2], cursor >= -1
            else {
                throw SyncCall.badArguments(
                    member, "takes (a(savts)a(ts)x), the arrays of one length, the revision -1 or more")
            }
            try await acknowledge(pushed, versions, cursor: cursor < 0 ? nil : cursor, writes)
            return [.int64(Int64(state.withLock { $0.queued }))]
        case SyncCall.apply:
            guard body.count == 3, case .array(_, let rows) = body[0], case .array(_, let refused) = body[1],
                case .int64(let last) = body[2], last >= 0
            else {
                throw SyncCall.badArguments(member, "takes (a(xssavts)a(sss)x), the revision 0 or more")
            }
            try await apply(
                rows.map { value throws(SettingsError) in try RemoteRow(channelValue: value) },
                refused: refused.map { value throws(DBusError) in
                    guard let row = RefusedRow(channelValue: value) else {
                        throw SyncCall.badArguments(member, "a refused row is (sss)")
                    }
                    return row
                }, upTo: last, writes)
            return []
        case SyncCall.report:
            guard body.count == 1, let fields = Settings1.ValueMap(body[0]) else {
                throw SyncCall.badArguments(member, "takes (a{sv})")
            }
            noteReport(fields)
            return []
        default:
            throw DBusError(.unknownMethod, "the broker has no sync call \(member.rawValue)")
        }
    }

    /// Takes the fields the sync process reports, of their own types only, with texts and lists bounded.
    private func noteReport(_ reported: Settings1.ValueMap) {
        var fields: [String: DBusValue] = [:]
        for (name, value) in reported {
            switch (name, value) {
            case (SyncStatusField.state, .string(let text)) where Self.states.contains(text):
                fields[name] = value
            case (SyncStatusField.error, .string(let text)):
                fields[name] = .string(LineText.excerpt(text, limit: 2000))
            case (SyncStatusField.last, .int64):
                fields[name] = value
            case (SyncStatusField.clampedMachines, .array(.string, let names)):
                fields[name] = .array(.string, names.prefix(100).map { name in
                    if case .string(let text) = name { return .string(LineText.excerpt(text, limit: 200)) }
                    return name
                })
            default:
                continue
            }
        }
        if fields[SyncStatusField.state] == nil { fields[SyncStatusField.state] = .string("starting") }
        state.withLock { $0.reported = fields }
    }

    /// The states a sync process may report.
    static let states: Set<String> = ["starting", "connected", "polling", "offline", "error", "stopped"]

    /// A commit queued changes: wake the sync process, and recount the queue for `Status` (at most one recount
    /// on its way, a fifth of a second after the first commit that asks for it).
    private func noteQueued(_ store: DurableStore) {
        let (channel, start) = state.withLock { state in
            defer { state.recounting = true }
            return (state.channel, !state.recounting)
        }
        channel?.signal(SyncCall.wake)
        guard start else { return }
        Task { [state] in
            try? await Task.sleep(for: .milliseconds(200))
            state.withLock { $0.recounting = false }
            if let count = try? await store.queuedSyncCount() { state.withLock { $0.queued = count } }
        }
    }
}
