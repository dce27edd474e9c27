// SPDX-License-Identifier: Apache-2.0

import DBus
import Dispatch
import SettingsModel

/// The connection a ``BusSettingsStore`` calls the broker through: opened on first use, opened again after
/// it is lost, and closed by ``close()``.
///
/// Calls go to the broker's well-known name, so the first one starts the broker by D-Bus activation when it
/// is not running. D-Bus errors become ``SettingsError``s in one place, ``settingsError(_:)``.
final class BrokerLink: Sendable {
    private enum Connection {
        case none
        case connecting(Task<DBusConnection, any Error>)
        case open(DBusConnection)
        case closed
    }

    let bus: BusSettingsStore.Bus
    let busName: BusName
    let timeout: Duration
    /// Whether the broker is reached, as the calls find it (``ConnectionStatus``).
    let status = StatusBoard()
    /// Called with each connection once it is open, before the call that opened it goes on.
    private let opened: @Sendable (DBusConnection) -> Void
    private let state = Locked<Connection>(.none)

    init(
        bus: BusSettingsStore.Bus, busName: BusName, timeout: Duration,
        opened: @escaping @Sendable (DBusConnection) -> Void = { _ in }
    ) {
        self.bus = bus
        self.busName = busName
        self.timeout = timeout
        self.opened = opened
    }

    /// The open connection, if there is one; nothing is opened.
    var openConnection: DBusConnection? {
        state.withLock { state in
            if case .open(let connection) = state { return connection }
            return nil
        }
    }

    /// The open connection, opening one if there is none.
    ///
    /// - Throws: `BrokerUnavailable` when the bus cannot be reached, `Disconnected` after ``close()``.
    func connection() async throws(SettingsError) -> DBusConnection {
        let current: Connection = try state.withLock { state throws(SettingsError) in
            switch state {
            case .open, .connecting: return state
            case .closed: throw SettingsError(.disconnected, "the settings store was closed")
            case .none:
                let bus = self.bus
                let opened = self.opened
                let task = Task {
                    let connection = try await DBusConnection.connect(to: bus.connectionBus)
                    opened(connection)
                    return connection
                }
                state = .connecting(task)
                return state
            }
        }
        let task: Task<DBusConnection, any Error>
        switch current {
        case .open(let connection): return connection
        case .connecting(let connecting): task = connecting
        case .none, .closed: throw SettingsError(.disconnected, "the settings store was closed")
        }
        do {
            let connection = try await task.value
            // Whoever moves the state from connecting to open watches the connection for its end.
            let (kept, opened) = state.withLock { state -> (Bool, Bool) in
                switch state {
                case .connecting, .none:
                    state = .open(connection)
                    return (true, true)
                case .open(let current): return (current === connection, false)
                case .closed: return (false, false)
                }
            }
            guard kept else {
                await connection.close()
                throw SettingsError(.disconnected, "the settings store was closed")
            }
            if opened { watchForLoss(of: connection) }
            return connection
        } catch let error as SettingsError {
            throw error
        } catch {
            state.withLock { state in
                if case .connecting = state { state = .none }
            }
            let failure = Self.settingsError(error, bus: bus)
            if !Task.isCancelled { noteFailure(failure) }
            throw failure
        }
    }

    /// Forgets a connection once it ends, so the next call opens a new one.
    private func watchForLoss(of connection: DBusConnection) {
        Task { [weak self] in
            await connection.waitUntilClosed()
            self?.state.withLock { state in
                if case .open(let current) = state, current === connection { state = .none }
            }
        }
    }

    /// Calls a method of the broker's `Settings1` interface and reads its reply.
    ///
    /// - Throws: ``SettingsError`` mapped from the reply or the failure; `InvalidValue` for a reply that is not
    ///   what the method answers.
    func call<Request: Settings1.Request>(_ request: Request) async throws(SettingsError) -> Request.Reply {
        let connection = try await connection()
        let reply: [DBusValue]
        do {
            reply = try await connection.call(
                destination: busName, path: SettingsBusNames.objectPath, interface: SettingsBusNames.interface,
                member: Request.method, arguments: request.body, timeout: timeout)
        } catch {
            let failure = Self.settingsError(error, bus: bus)
            if !Task.isCancelled { noteFailure(failure) }
            throw failure
        }
        status.answered()
        return try Request.reply(reply)
    }

    /// Records what a failed call says of the connection: the broker answered with an error of its own, or
    /// it could not be reached; a call that timed out says neither.
    func noteFailure(_ error: SettingsError) {
        switch error.code {
        case .brokerUnavailable, .disconnected: status.set(.unavailable(error))
        case .timedOut: break
        default: status.answered()
        }
    }

    /// Closes the connection; later calls fail with `Disconnected`.
    func close() async {
        let previous = state.withLock { state in
            defer { state = .closed }
            return state
        }
        status.set(.unavailable(SettingsError(.disconnected, "the settings store was closed")))
        status.finish()
        switch previous {
        case .open(let connection): await connection.close()
        case .connecting(let task): if let connection = try? await task.value { await connection.close() }
        case .none, .closed: break
        }
    }

    /// The status while the broker's name has no owner (it exited, or was stopped); a call starts it again by
    /// D-Bus activation where it is installed.
    static var brokerLeft: SettingsError {
        SettingsError(.brokerUnavailable, "the settings broker left the bus; it is started again by the next call where D-Bus activation is installed")
    }

    /// Follows the broker's name while the status is followed, so that a broker started (or stopped) while the
    /// store makes no call is noticed: a new owner is asked for `GetMany` of no key, which settles the status.
    func followPresence() async {
        var failures = 0
        while !Task.isCancelled {
            do throws(SettingsError) {
                let connection = try await connection()
                let owners: NameOwnerChanges
                do {
                    owners = try await connection.nameOwnerChanges(of: busName)
                } catch {
                    throw Self.settingsError(error, bus: bus)
                }
                failures = 0
                // Asking once settles the status; the broker's name changing owner settles it again.
                _ = try? await call(Settings1.GetManyRequest(keys: []))
                for await change in owners {
                    if change.newOwner != nil {
                        _ = try? await call(Settings1.GetManyRequest(keys: []))
                    } else {
                        status.set(.unavailable(Self.brokerLeft))
                    }
                }
            } catch {
                if error.code == .disconnected, case .closed = state.withLock({ $0 }) { return }
                failures += 1
            }
            let delay = min(2000, 25 << min(failures, 7))
            do { try await Task.sleep(for: .milliseconds(delay)) } catch { return }
        }
    }

    /// Maps a failure of a call to the broker onto a ``SettingsError``.
    static func settingsError(_ error: any Error, bus: BusSettingsStore.Bus) -> SettingsError {
        if let error = error as? SettingsError { return error }
        if error is CancellationError { return SettingsError(.disconnected, "the call was cancelled") }
        guard let error = error as? DBusError else { return SettingsError(.brokerUnavailable, "\(error)") }
        // The broker's own errors keep their code and message; the bus's errors get a message of ours.
        if error.name.rawValue.hasPrefix(SettingsBusNames.errorPrefix), let settings = SettingsError(error) {
            return settings
        }
        switch error.name {
        case .serviceUnknown, .nameHasNoOwner:
            return SettingsError(
                .brokerUnavailable,
                "no settings broker runs on the \(busDescription(bus)) and none could be started by D-Bus "
                    + "activation (\(error.message)). Install it with `scripts/install` (it puts "
                    + "io.github.settingsbus.Settings1.service into ~/.local/share/dbus-1/services), or start "
                    + "`settings-broker` yourself.")
        case .noReply, .timeout:
            return SettingsError(.timedOut, "the settings broker did not answer in time: \(error.message)")
        case .disconnected:
            return SettingsError(.disconnected, "the connection to the \(busDescription(bus)) was lost: \(error.message)")
        case .invalidArgs:
            return SettingsError(.invalidValue, error.message)
        case .accessDenied:
            return SettingsError(.notWritable, error.message)
        default:
            if error.name.rawValue.hasPrefix("org.freedesktop.DBus.Error.Spawn") {
                return SettingsError(
                    .brokerUnavailable, "D-Bus could not start the settings broker: \(error.message)")
            }
            if error.name.rawValue.hasPrefix("org.freedesktop.DBus.Error.") {
                return SettingsError(
                    .brokerUnavailable, "cannot reach the settings broker on the \(busDescription(bus)): \(error)")
            }
            return SettingsError(.brokerUnavailable, "the settings broker failed: \(error)")
        }
    }

    private static func busDescription(_ bus: BusSettingsStore.Bus) -> String {
        switch bus {
        case .session: return "session bus"
        case .system: return "system bus"
        case .address(let address): return "bus at \(address)"
        }
    }
}

/// A link is the executor of ``BusSettingsStore/executor``: it runs jobs on its open connection's thread, and
/// on a global dispatch queue while no connection is open.
extension BrokerLink: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        // Each job runs as a job of this executor, wherever it runs, so that its task does not switch back.
        let executor = asUnownedTaskExecutor()
        if let connection = openConnection {
            connection.executor.enqueue(job, as: executor)
        } else {
            let job = UnownedJob(job)
            DispatchQueue.global().async { job.runSynchronously(on: executor) }
        }
    }
}
