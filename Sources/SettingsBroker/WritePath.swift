// SPDX-License-Identifier: Apache-2.0

// Design note: the write path runs one way.
//
// Every write of the broker, whoever makes it (a D-Bus method, the sync process's remote changes, a schema
// file, the administrator's layer), goes through `WritePath.write`:
//
// 1. the changeset is validated by the store's rules and staged (`DurableStore.stage`), on the caller's thread;
//    a refusal is answered at once;
// 2. the first changeset staged while no commit is in flight starts one, where the caller placed it: a small
//    commit on the connection's thread once it has dispatched the calls it has read (`AfterDispatch`, which
//    the D-Bus export gives), everything else on the commit queue below;
// 3. the commit (`DurableStore.commit`) writes the batch to the store file and to memory and returns an
//    outcome: each writer's answer and what each commit changed;
// 4. `send` answers the writers, then emits one `Changed` (and, for schemas, one `DescriptionChanged`) per
//    commit, in serial order: a writer waits for its own reply only.
//
// The store hands nothing back through closures: it keeps each changeset's `WriteWaiter` beside it, untouched,
// and returns it with the answer; answering and announcing happen here, in that order, in one place.

import DBus
import Dispatch
import Logging
import SettingsModel
import Synchronization

/// Who waits for a staged changeset's answer. The store keeps it beside the changeset and returns it with the
/// answer; only ``WritePath`` acts on it.
enum WriteWaiter: Sendable {
    /// A D-Bus method call: its reply is `answer(serial)` (or the error), sent once the writer's process is
    /// known to the history (``WriterProcesses``).
    case call(DBusReply, origin: String, answer: @Sendable (UInt64) -> [DBusValue])
    /// Anything else: `then` is called with the answer (a task's continuation, a schema file's report).
    case then(@Sendable (Result<UInt64, SettingsError>) -> Void)
}

/// The broker's one way for writes into the store, from the request to the reply and the signal (see the
/// design note above).
public final class WritePath: Sendable {
    /// The store written to.
    let store: DurableStore
    /// Where `Changed` and `DescriptionChanged` go; nil for a store with no bus (tests of the store).
    private let connection: DBusConnection?
    private let logger: Logger
    /// The process behind each writer's name, for the history; nil when the store keeps no history.
    let writers: WriterProcesses?
    /// Who else announces each commit, after its `Changed`: the sandboxed apps' name (``SandboxedSignals``) and
    /// the desktop portal's backend (``PortalSettings``), once they are served.
    private let announcers = Mutex<[@Sendable (CommittedChange) -> Void]>([])
    /// The view of the user's values that each commit writes what it changed to, before its answers and
    /// signals (``PublishedView``); nil while none is published.
    private let view = Mutex<PublishedView?>(nil)
    /// Runs the commits that no placement took, one at a time.
    private let commitQueue = DispatchQueue(label: "settings-store-commit")

    /// - Parameters:
    ///   - connection: the bus the signals are emitted on; nil to emit none.
    ///   - processOf: asks the bus for the process id of a unique name (`GetConnectionUnixProcessID`), for the
    ///     history's writers: at a name's first write, whose answer waits for it (``WriterProcesses``); nil to
    ///     record no process.
    init(
        store: DurableStore, connection: DBusConnection? = nil,
        logger: Logger = Logger(label: "io.github.settingsbus.broker"),
        processOf: (@Sendable (String) async -> UInt32?)? = nil
    ) {
        self.store = store
        self.connection = connection
        self.logger = logger
        self.writers = processOf.map { lookUp in
            WriterProcesses(lookUp: lookUp) { name, process in
                await store.recordWriter(origin: name, pid: process.pid, process: process.name)
            }
        }
    }

    /// Commits a changeset and returns its serial once it is durable (its `Changed` follows the answer).
    ///
    /// - Throws: what ``DurableStore/stage(_:for:)`` refuses with, or `StoreFailure` when the commit fails.
    func apply(_ changeset: Changeset) async throws(SettingsError) -> UInt64 {
        try await handOff { deliver in write(changeset, for: .then(deliver)) }.get()
    }

    /// Stages a changeset, on the calling thread, and starts a commit if none is in flight: at `placement`
    /// when the commit is small (at most ``DurableStore/inlineCommitLimit`` writes) and the last was fast,
    /// else on the commit queue. `waiter` is answered when the changeset is committed or refused.
    func write(_ changeset: Changeset, for waiter: WriteWaiter, placement: (any CommitPlacement)? = nil) {
        switch store.stage(changeset, for: waiter) {
        case .answered(let result):
            answer(waiter, result)
        case .staged(let startsCommit, let mayRunInline):
            guard startsCommit else { return }
            if mayRunInline, let placement, placement.place({ self.commitSmallBatch() }) { return }
            commitQueue.async { self.commitAccumulated() }
        }
    }

    /// Puts a new administrator's layer in force: the keys whose value it changed are announced by a commit,
    /// and the keys whose description changed by a `DescriptionChanged` sent once that commit is durable.
    func putAdministrator(_ layer: AdministratorLayer) {
        let (announcing, described) = store.putAdministrator(layer)
        write(announcing, for: .then { [self] result in
            guard case .success(let serial) = result else { return }
            // The files of the keys whose locks changed, before anyone hears of it.
            if let view = view.withLock({ $0 }) { view.publish(Set(described.map(\.parent)), from: store) }
            guard let signal = Settings1.DescriptionChangedSignal(
                    keys: described, serial: serial, origin: DurableStore.administratorOrigin)
            else { return }
            emit(signal.message, "DescriptionChanged", serial: serial)
            // Sandboxed apps learn of the locks on keys they may read, one by one.
            let change = CommittedChange(
                path: .directory(.root), values: [], removed: [], secretKeys: [], serial: serial,
                origin: DurableStore.administratorOrigin, describedKeys: described)
            for announcer in announcers.withLock({ $0 }) { announcer(change) }
        })
    }

    /// Has each commit write what it changed to `view` from now on, before its answers and signals.
    func publishing(to view: PublishedView) {
        self.view.withLock { $0 = view }
    }

    /// Has each commit announced by `announcer` too, from now on, after its `Changed` and in serial order.
    func alsoAnnounce(_ announcer: @escaping @Sendable (CommittedChange) -> Void) {
        announcers.withLock { $0.append(announcer) }
    }

    // MARK: - Committing

    /// Commits what has accumulated, batch after batch, until nothing is left. Commit queue only.
    private func commitAccumulated() {
        while true {
            guard let batch = store.takeBatch(limit: nil) else {
                if store.endCommitting() { return }
                continue
            }
            if let outcome = store.commit(batch) { send(outcome) }
        }
    }

    /// Commits what has accumulated where a placement put it, if it is at most ``DurableStore/inlineCommitLimit``
    /// writes and no other program holds the store's lock; anything more, or accumulated meanwhile, goes on to
    /// the commit queue.
    private func commitSmallBatch() {
        if let batch = store.takeBatch(limit: DurableStore.inlineCommitLimit),
            let outcome = store.commit(batch, waitingForLocks: false)
        {
            send(outcome)
            if store.endCommitting() { return }
        }
        commitQueue.async { self.commitAccumulated() }
    }

    /// Answers a commit's writers, then announces what it changed, in serial order.
    private func send(_ outcome: DurableStore.CommitOutcome) {
        if let view = view.withLock({ $0 }), !outcome.changes.isEmpty {
            view.publish(Self.directories(touchedBy: outcome.changes), from: store)
        }
        for (waiter, result) in outcome.answers { answer(waiter, result) }
        let announcers = announcers.withLock { $0 }
        for change in outcome.changes {
            if change.changesValues {
                emit(SettingsInterface.changedSignal(change), "Changed", serial: change.serial)
            }
            if let signal = SettingsInterface.descriptionChangedSignal(change) {
                emit(signal, "DescriptionChanged", serial: change.serial)
            }
            for announcer in announcers { announcer(change) }
        }
    }

    /// The directories of the keys that commits changed or described.
    private static func directories(touchedBy changes: [CommittedChange]) -> Set<SettingDirectory> {
        var directories: Set<SettingDirectory> = []
        for change in changes {
            for key in change.values.lazy.map(\.key) + change.removed + change.secretKeys {
                directories.insert(SettingPath(unchecked: key).parent)
            }
            for key in change.describedKeys { directories.insert(key.parent) }
        }
        return directories
    }

    private func answer(_ waiter: WriteWaiter, _ result: Result<UInt64, SettingsError>) {
        switch waiter {
        case .call(let reply, let origin, let body):
            let message = result.map(body).mapError { $0.dbusError as any Error }
            guard let writers else { return reply.send(message) }
            writers.whenKnown(origin) { reply.send(message) }
        case .then(let body):
            body(result)
        }
    }

    private func emit(_ signal: DBusMessage, _ member: String, serial: UInt64) {
        guard let connection else { return }
        do { try connection.send(signal) } catch {
            logger.error("cannot emit \(member)", metadata: ["serial": "\(serial)", "error": "\(error)"])
        }
    }
}
