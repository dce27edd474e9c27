// SPDX-License-Identifier: Apache-2.0

// Design note: how a write becomes durable.
//
// Writes come through `WritePath` (WritePath.swift), which drives the steps below and sends what they return;
// the store calls nothing back.
//
// `stage` validates a changeset against the staged view (committed state overlaid with changesets accepted
// but not yet committed) by the rules the in-memory store follows too (`SettingsRules`, in SettingsModel;
// DurableStore+Validation.swift), gives it the next serial and stages it beside its writer's `WriteWaiter`. At
// most one SQLite transaction is in flight; changesets that arrive meanwhile accumulate and are written
// together by the next one (group commit: one fsync for many writers). `commit` writes a batch, applies its
// changesets to the committed state in serial order and returns each waiter's answer and what each changeset
// changed; the write path answers the writers and then emits one `Changed` signal per changeset, so that a
// writer waits for its own reply only. Reads see committed state only, so a value is never visible before it
// is durable. If a transaction fails, every staged changeset fails with `StoreFailure` and nothing of it
// becomes visible. Costs do not depend on the store's size: a commit touches only the rows it changes.
//
// The store knows no threads: where a commit runs is the write path's decision. A small commit started by a
// D-Bus method (at most `inlineCommitLimit` writes, the store's lock free at once, the last commit no slower
// than `slowCommit`) runs on the connection's own thread once it has dispatched the calls it has read, whose
// answers and signals are then sent by that thread with no other thread woken; anything else runs on the
// write path's commit queue, so that a large, blocked or slow commit holds up the connection once at most.
//
// The store is a class with two locks rather than an actor, so that the D-Bus export can validate a `Set` and
// read a `Get` on the connection's own thread: a durable `Set` wakes no thread in the broker but the
// connection's, where an actor and its tasks woke seven. Lock order: `writer`, then `committed`; neither is
// held while calling out.
//
// Directories cost what they hold, and hold up no one for long. The keys of the values, of the schemas and of
// the resets since start-up are kept in byte order (`SortedKeys`), so a directory is a range of keys. Holding
// `committed` stops every `Get` (they are read on the connection's thread), so nothing holds it for more than
// a bounded piece of work (512 keys read, 1,024 written):
// - `ReadTree` and `List` read `readPiece` (512) keys per hold and go on only if no commit in between touched
//   the directory (`RecentChanges`, the locations of the last 64 commits), so each reply is the directory as
//   of one serial; after three restarts under a directory written without pause the rest is read in one hold.
// - A commit of more than `memoryPiece` (1,024) writes (a `Reset` of a large directory, a large `Apply`) is
//   applied to memory in pieces: the old values of its keys are put beside the table first
//   (`CommittedState.applying`, through which every read goes), the table then changes a piece at a time, and
//   one short hold moves the serial on and drops the old values, so readers see all of the commit or none.
//   A batch of more than `memoryPiece` writes is applied without the `writer` lock (a smaller one holds it,
//   as before): validation meanwhile sees the batch's writes staged, and they are unstaged, in pieces, once
//   the committed state shows them.
// - Validation reads a directory's committed keys (a directory reset, a compare-and-set on a directory) in
//   pieces under `writer`; a commit applied between two pieces has its writes staged, which override them.
// The price: while a large commit is applied, a `Get` looks its key up among the old values too, and the old
// values take memory (about 100 bytes a key) until the commit is applied. Taking and staging the keys of a
// directory `Reset` is linear in the directory (0.25 – 0.5 s for 100,000 keys on a loaded machine): the D-Bus
// export does it on its ordered hand-off queue (`WriteHandOff`), not on the connection's thread.

import DBus
import Dispatch
import SettingsModel

/// The broker's settings: values and schemas in memory for reads, persisted in SQLite with group commit.
public final class DurableStore: Sendable {
    typealias UserValue = CommittedState.UserValue

    /// The store file (its condition and backup are reported by `status()`).
    let persistence: StorePersistence
    /// Values, schemas and serial as of the last commit; written only by commits, one at a time.
    let committed: Locked<CommittedState>
    /// Staging, the changesets waiting for a commit, and what the commit queue is doing.
    let writer: Locked<WriterState>
    /// Keys unseen since start-up count as changed at this serial (resets before start-up are not kept).
    let baselineSerial: UInt64
    /// What commits queue for sync across machines; nil while sync is off (``enableSync(_:)``).
    let syncSettings = Locked<SyncSettings?>(nil)

    /// The store file.
    let path: String
    /// Rows of the store file that could not be read at start-up (kept untouched), with the reason.
    let unreadable: [(path: String, reason: String)]

    struct WriterState {
        var nextSerial: UInt64
        /// Serials of resets, so compare-and-set sees a removal as a change.
        var resetSerials = ResetSerials()
        var stagedValues: [SettingPath: (value: DBusValue?, serial: UInt64)] = [:]
        /// A staged removal (`Unregister`) is `.some(nil)`.
        var stagedSchemas: [SettingPath: SettingSchema?] = [:]
        var accumulating: [(changeset: ResolvedChangeset, waiter: WriteWaiter)] = []
        var commitInFlight = false
        /// Whether the last commit took longer than `slowCommit`: then the next runs on the commit queue.
        var lastCommitWasSlow = false
        var slowCommit = DurableStore.slowCommit
        var closed = false
        var idleWaiters: [@Sendable () -> Void] = []
    }

    private init(persistence: StorePersistence, contents: StorePersistence.Contents) {
        self.persistence = persistence
        self.path = persistence.path
        self.baselineSerial = contents.serial
        self.unreadable = contents.unreadable
        self.committed = Locked(
            CommittedState(values: contents.values, schemas: contents.schemas, serial: contents.serial))
        self.writer = Locked(WriterState(nextSerial: contents.serial + 1))
    }

    /// Opens the store file (creating it if needed) and reads it into memory.
    ///
    /// - Throws: ``SettingsError`` `StoreFailure` naming the file and the reason.
    static func open(path: String, durability: Durability = .full) async throws(SettingsError) -> DurableStore {
        // Opening checks and reads the whole file (about 0.1 s with 100,000 keys): on a thread of its own,
        // not on one of the tasks' threads.
        let opened: Result<StorePersistence, SettingsError> = await handOff { deliver in
            DispatchQueue.global(qos: .userInitiated).async {
                deliver(Result { () throws(SettingsError) in try StorePersistence(path: path, durability: durability) })
            }
        }
        let persistence = try opened.get()
        let contents = try await persistence.load()
        return DurableStore(persistence: persistence, contents: contents)
    }

    /// The serial of the last commit.
    var serial: UInt64 { committed.withLock { $0.serial } }

    /// The number of keys that have a user value.
    var userValueCount: Int { committed.withLock { $0.values.count } }

    /// The number of registered schemas.
    var schemaCount: Int { committed.withLock { $0.schemas.count } }

    // MARK: - Writing

    /// What ``stage(_:for:)`` did with a changeset.
    enum Staging {
        /// Refused, or it changes nothing: the writer's answer, to send now.
        case answered(Result<UInt64, SettingsError>)
        /// Staged, to be answered by the commit that writes it. `startsCommit` says that no commit was in
        /// flight, so the caller must start one (``WritePath``); `mayRunInline` that the last commit was fast.
        case staged(startsCommit: Bool, mayRunInline: Bool)
    }

    /// Validates a changeset and stages it for the next commit, at once, on the calling thread; it never
    /// blocks on the disk. The store keeps `waiter` beside it, untouched, and gives it back with the changeset's
    /// answer from ``commitNext(limit:waitingForLocks:)`` (or at once in ``Staging/answered(_:)``).
    ///
    /// A changeset that changes nothing (it resets keys that have no user value and registers only schemas
    /// that are registered already) stages nothing and is answered with the current serial.
    ///
    /// Refusals: ``SettingsError`` `TypeMismatch`, `OutOfRange`, `InvalidValue`, `TooLarge` for a refused
    /// value; `SchemaConflict`; `Conflict` for a failed compare-and-set; `StoreFailure` for a store that is
    /// read-only or closing. A refused changeset stores nothing.
    func stage(_ changeset: Changeset, for waiter: WriteWaiter) -> Staging {
        // The checks that need no state run before the lock: for a large changeset they are most of the work,
        // and the lock holds up the connection's thread when a `Set` arrives meanwhile.
        for (key, value) in changeset.sets {
            do throws(SettingsError) {
                try value.validateForStorage(at: key)
            } catch {
                return .answered(.failure(error))
            }
        }
        return writer.withLock { state in
            guard !state.closed else {
                return .answered(.failure(.storeFailure("the broker is shutting down; retry in a moment")))
            }
            let resolved: ResolvedChangeset
            do throws(SettingsError) {
                resolved = try resolve(changeset, state)
            } catch {
                return .answered(.failure(error))
            }
            guard !resolved.onlyAnnounces || !resolved.announced.isEmpty else {
                return .answered(.success(state.nextSerial - 1))
            }
            // Refused now rather than at its commit, where it would fail the announcements batched with it.
            guard resolved.onlyAnnounces || !persistence.isReadOnly else {
                return .answered(.failure(persistence.readOnlyFailure))
            }
            state.nextSerial += 1
            if resolved.writes.count > 64 { state.stagedValues.reserveCapacity(state.stagedValues.count + resolved.writes.count) }
            for write in resolved.writes {
                state.stagedValues[write.key] = (write.value, resolved.serial)
            }
            for registration in resolved.registrations {
                state.stagedSchemas[registration.key] = registration.schema
            }
            for key in resolved.unregistrations {
                state.stagedSchemas[key] = .some(nil)
            }
            state.accumulating.append((resolved, waiter))
            guard !state.commitInFlight else { return .staged(startsCommit: false, mayRunInline: false) }
            state.commitInFlight = true
            return .staged(startsCommit: true, mayRunInline: !state.lastCommitWasSlow)
        }
    }

    /// The most writes a commit may hold to run outside the commit queue (``WritePath``).
    static let inlineCommitLimit = 32

    /// A commit that takes longer than this (a slow or busy disk) sends the next one to the commit queue, and
    /// commits stay there until one is fast again: a slow disk holds up the connection's reads for one commit
    /// at most.
    static let slowCommit: Duration = .milliseconds(2)

    /// Sets the duration above which a commit counts as slow (tests make every commit slow).
    func setSlowCommit(_ duration: Duration) {
        writer.withLock { $0.slowCommit = duration }
    }

    /// Refuses further writes and waits until every accepted changeset has been committed (or has failed).
    func close() async {
        writer.withLock { $0.closed = true }
        await flush()
    }

    /// Waits until every accepted changeset has been committed (or has failed).
    func flush() async {
        let _: Bool = await handOff { deliver in
            let idle = writer.withLock { state in
                guard state.commitInFlight || !state.accumulating.isEmpty else { return true }
                state.idleWaiters.append { deliver(true) }
                return false
            }
            if idle { deliver(true) }
        }
    }
}
