// SPDX-License-Identifier: Apache-2.0

public import DBus
import SettingsModel

/// The `io.github.settingsbus.Settings1` interface: the D-Bus face of a ``DurableStore``.
///
/// Every method checks its arguments before touching the store and answers failures with the
/// `io.github.settingsbus.Settings1.Error.*` names of ``SettingsError``. The interface XML in `dbus/` is what
/// ``interface(store:)`` introspects as.
public enum SettingsInterface {
    /// The interface version reported by the `Version` property, ``SettingsModel/Settings1/version``.
    public static let version: UInt32 = Settings1.version

    /// Builds the interface over a store.
    ///
    /// Each method is made from its request type in ``SettingsModel/Settings1``: its name, its inputs and
    /// outputs, and the reading of its arguments, which answers a call that does not fit with the error the
    /// request type names.
    ///
    /// - Parameters:
    ///   - secretReaders: the users given the values of secret keys (``SecretReaders``); any other caller gets
    ///     `AccessDenied` from `Get` and `GetMany` of a secret key, and `ReadTree` without them.
    ///   - activity: called at the start of every method call (the broker's idle timer uses it).
    ///   - moreStatus: fields that `Status` reports beside the store's own (the schema files).
    ///   - processOf: asks the bus for the process id of a unique name (`GetConnectionUnixProcessID`), for the
    ///     history's writers: at a name's first write, whose answer waits for it (``WriterProcesses``); nil to
    ///     record no process.
    public static func interface(
        store: DurableStore, secretReaders: SecretReaders = SecretReaders(),
        activity: @escaping @Sendable () -> Void = {},
        moreStatus: @escaping @Sendable () -> [String: DBusValue] = { [:] },
        processOf: (@Sendable (String) async -> UInt32?)? = nil
    ) -> DBusInterface {
        let writers = processOf.map { lookUp in
            WriterProcesses(lookUp: lookUp) { name, process in
                await store.recordWriter(origin: name, pid: process.pid, process: process.name)
            }
        }
        /// Runs `body` once the writer's process is known (at once but at a name's first write).
        @Sendable func afterWriterKnown(_ call: DBusMethodCall, _ body: @escaping @Sendable () -> Void) {
            guard let writers else { return body() }
            writers.whenKnown(origin(call), body)
        }
        func method<Request: Settings1.Request>(
            _: Request.Type,
            _ body: @escaping @Sendable (DBusMethodCall, Request) async throws(SettingsError) -> Request.Reply
        ) -> DBusMethod {
            DBusMethod(name: Request.method, inputs: Request.inputs, outputs: Request.outputs) { call in
                activity()
                do throws(SettingsError) {
                    return try await body(call, try Request(call.arguments)).body
                } catch {
                    throw error.dbusError
                }
            }
        }
        /// A method answered from the store's committed state on the connection's thread (no task, no wait).
        /// Its body may also throw `SenderUnixUserNeeded` (``secretWithheld(_:_:)``): the connection then runs it
        /// again once it knows the caller's user.
        func immediate<Request: Settings1.Request>(
            _: Request.Type, _ body: @escaping @Sendable (DBusMethodCall, Request) throws -> Request.Reply
        ) -> DBusMethod {
            DBusMethod(
                name: Request.method, inputs: Request.inputs, outputs: Request.outputs,
                immediate: { call in
                    activity()
                    do {
                        return try body(call, try Request(call.arguments)).body
                    } catch let error as SettingsError {
                        throw error.dbusError
                    }
                })
        }
        /// Whether the caller may read secret values: false until its user is known.
        @Sendable func readsSecrets(_ call: DBusMethodCall) -> Bool {
            guard let user = call.senderUnixUser else { return false }
            return secretReaders.allows(user)
        }
        /// What a read that withheld the values of secret keys throws: `SenderUnixUserNeeded` while the caller's
        /// user is not known, then `AccessDenied`.
        @Sendable func secretWithheld(_ call: DBusMethodCall, _ keys: [SettingPath]) -> any Error {
            guard let user = call.senderUnixUser else { return DBusMethodCall.SenderUnixUserNeeded() }
            let named = keys.prefix(3).map(\.rawValue).joined(separator: ", ") + (keys.count > 3 ? ", …" : "")
            return SettingsError.accessDenied(
                "\(named) \(keys.count == 1 ? "is a secret key" : "are secret keys"): user \(user) may not read "
                    + "\(keys.count == 1 ? "its value" : "their values"); the broker gives secret values only to "
                    + "root, its own user and the users named by its --secret-readers")
        }
        let handOff = WriteHandOff()
        /// A write validated and staged on the connection's thread, and answered where its commit runs: on that
        /// thread once the calls read so far are dispatched (a small commit), else on the store's commit queue.
        /// It is prepared on the hand-off queue instead when `slow` says so, or when a write handed off before
        /// it still waits (see ``WriteHandOff``). Its arguments are read on the connection's thread; a call
        /// that does not fit is answered where its changeset would have been made, so in order.
        ///
        /// Every method that writes is made here, so that one connection's writes of any kind are staged, and
        /// take effect, in the order it sent them: an `Apply` or a `Register` is never overtaken by a `Set`
        /// sent after it (a `Register` of a secret key then a `Set` of it must not broadcast the value).
        func write<Request: Settings1.Request>(
            _: Request.Type,
            slow: @escaping @Sendable (Request) -> Bool = { _ in false },
            _ changeset: @escaping @Sendable (DBusMethodCall, Request) throws(SettingsError) -> Changeset
        ) -> DBusMethod where Request.Reply == Settings1.SerialReply {
            write(Request.self, slow: slow, reply: { Settings1.SerialReply(serial: $0) }, changeset)
        }
        func write<Request: Settings1.Request>(
            _: Request.Type,
            slow: @escaping @Sendable (Request) -> Bool = { _ in false },
            reply makeReply: @escaping @Sendable (UInt64) -> Request.Reply,
            _ changeset: @escaping @Sendable (DBusMethodCall, Request) throws(SettingsError) -> Changeset
        ) -> DBusMethod {
            DBusMethod(
                name: Request.method, inputs: Request.inputs, outputs: Request.outputs,
                deferred: { call, reply in
                    activity()
                    let request = Result { () throws(SettingsError) in try Request(call.arguments) }
                    @Sendable func stage(placement: (any CommitPlacement)?) {
                        do throws(SettingsError) {
                            store.submit(try changeset(call, try request.get()), placement: placement) { result in
                                afterWriterKnown(call) {
                                    reply.send(result.map { makeReply($0).body }.mapError { $0.dbusError })
                                }
                            }
                        } catch {
                            reply.send(.failure(error.dbusError))
                        }
                    }
                    if handOff.isBusy || (try? request.get()).map(slow) == true {
                        handOff.run { stage(placement: nil) }
                    } else {
                        stage(placement: AfterDispatch(reply: reply))
                    }
                })
        }
        let methods: [DBusMethod] = [
            immediate(Settings1.GetRequest.self) { call, request in
                guard let value = try store.get(request.key, includingSecret: readsSecrets(call)) else {
                    throw secretWithheld(call, [request.key])
                }
                return Settings1.ValueReply(value: value)
            },
            immediate(Settings1.GetManyRequest.self) { call, request in
                let (values, serial, withheld) = store.getMany(request.keys, includingSecrets: readsSecrets(call))
                if !withheld.isEmpty { throw secretWithheld(call, withheld) }
                return try fitting(
                    Settings1.ValuesReply(values: Settings1.ValueMap(values), serial: serial),
                    "the values of \(request.keys.count) keys")
            },
            // A task, like the other methods but Get and GetMany; the values of secret keys are left out for a
            // caller that may not read them (asked for its user only when the directory holds one).
            DBusMethod(
                name: Settings1.ReadTreeRequest.method, inputs: Settings1.ReadTreeRequest.inputs,
                outputs: Settings1.ReadTreeRequest.outputs
            ) { call in
                activity()
                do {
                    let dir = try Settings1.ReadTreeRequest(call.arguments).directory
                    let (values, serial, withheld) = store.readTree(dir, includingSecrets: readsSecrets(call))
                    if withheld, call.senderUnixUser == nil { throw DBusMethodCall.SenderUnixUserNeeded() }
                    return try fitting(
                        Settings1.ValuesReply(values: Settings1.ValueMap(values), serial: serial),
                        "the values under \(dir)"
                    ).body
                } catch let error as SettingsError {
                    throw error.dbusError
                }
            },
            method(Settings1.ListRequest.self) { _, request throws(SettingsError) in
                try fitting(
                    Settings1.ListReply(children: store.list(request.directory)),
                    "the children of \(request.directory)")
            },
            write(Settings1.SetRequest.self) { call, request throws(SettingsError) in
                Changeset(sets: [(request.key, request.value)], origin: origin(call))
            },
            // A long text is parsed off the connection's thread (see ``inlineParseLimit``); one too long to be a
            // value is refused by its size before it is parsed.
            write(Settings1.SetFromStringRequest.self, slow: { $0.text.utf8.count > inlineParseLimit }) {
                call, request throws(SettingsError) in
                let key = request.key
                let size = request.text.utf8.count
                guard size <= maximumTextSize else {
                    throw .tooLarge(
                        "the text for \(key) is \(size) bytes; SetFromString parses text of at most \(maximumTextSize) "
                            + "bytes (8 MiB), and a value is at most \(SettingsBusNames.maximumValueSize) bytes (1 MiB)")
                }
                let value: DBusValue
                do throws(GVariantTextError) {
                    value = try GVariantText.parse(request.text, as: store.registeredSchema(key)?.type)
                } catch {
                    throw error.settingsError(for: key)
                }
                return Changeset(sets: [(key, value)], origin: origin(call))
            },
            // A large Apply, or one that resets a directory (which collects every key below it), is prepared
            // off the connection's thread, in line with the other writes.
            write(Settings1.ApplyRequest.self, slow: { Self.applyIsSlow($0) }) { call, request throws(SettingsError) in
                var changeset = Changeset(origin: origin(call))
                changeset.sets = request.sets
                changeset.resets = request.resets
                changeset.ifSerial = request.options.ifSerial
                return changeset
            },
            // A directory's reset collects every key below it: not on the connection's thread.
            write(Settings1.ResetRequest.self, slow: { if case .directory = $0.location { true } else { false } }) {
                call, request throws(SettingsError) in
                Changeset(resets: [request.location], origin: origin(call))
            },
            write(Settings1.RegisterRequest.self, reply: { _ in Settings1.EmptyReply() }) {
                call, request throws(SettingsError) in
                let schema = request.schema
                try schema.validate(for: request.key)
                var changeset = Changeset(registrations: [(request.key, schema)], origin: origin(call))
                changeset.replacing = request.options.replace
                return changeset
            },
            write(Settings1.UnregisterRequest.self) { call, request throws(SettingsError) in
                var changeset = Changeset(resets: request.removeValue ? [.key(request.key)] : [], origin: origin(call))
                changeset.unregistrations = [request.key]
                return changeset
            },
            // Every reply is size-checked, as reads are: what Describe and Status report is bounded where it is
            // made (values, problem texts, lists of refusals), and a reply that still would not fit is refused
            // with TooLarge rather than sent, which would get the broker disconnected from the bus.
            method(Settings1.DescribeRequest.self) { _, request throws(SettingsError) in
                try fitting(SchemaCoding.describe(try store.describe(request.key)), "the description of \(request.key)")
            },
            method(Settings1.StatusRequest.self) { _, _ throws(SettingsError) in
                try fitting(
                    Settings1.StatusReply(fields: store.status().merging(moreStatus()) { own, _ in own }),
                    "the broker's status")
            },
            // Read from the store file on a connection of its own; a writer whose process was found but not yet
            // recorded there is named from memory.
            method(Settings1.HistoryRequest.self) { _, request throws(SettingsError) in
                var commits = try await store.history(request)
                if let writers {
                    for index in commits.indices where commits[index].process.isEmpty {
                        if let process = writers.known(commits[index].writer) {
                            commits[index].process = process.name
                            commits[index].pid = process.pid
                        }
                    }
                }
                return try fitting(Settings1.HistoryReply(commits: commits), "the history asked for")
            },
        ]
        return DBusInterface(
            name: SettingsBusNames.interface,
            methods: methods,
            signals: Settings1.signals.map { DBusSignal(name: $0.member, arguments: $0.arguments) },
            properties: [
                DBusProperty(
                    name: Settings1.Property.serial.name, type: Settings1.Property.serial.type, changeSignal: .none
                ) { .uint64(store.serial) },
                DBusProperty(
                    name: Settings1.Property.version.name, type: Settings1.Property.version.type,
                    changeSignal: .constant
                ) { .uint32(version) },
            ])
    }

    /// The `Changed` signal for one commit.
    ///
    /// Keys registered as secret appear in neither `values` nor `removed`: the signal's `path` still covers
    /// them, so a watcher of such a key sees that something under its path changed and re-reads it. A commit
    /// whose values and removed keys would take more than ``SettingsModel/SettingsBusNames/maximumSignalSize``
    /// is announced the same way for every key it changed: `values` and `removed` empty, `path` covering them.
    public static func changedSignal(_ change: CommittedChange) -> DBusMessage {
        var signal = Settings1.ChangedSignal(
            path: change.path, values: Settings1.ValueMap(change.values.lazy.map { ($0.key, $0.value) }),
            removed: change.removed, serial: change.serial, origin: change.origin)
        let body = signal.body
        if body[1].approximateSize + body[2].approximateSize > SettingsBusNames.maximumSignalSize {
            signal.values = Settings1.ValueMap()
            signal.removed = []
        }
        return signal.message
    }

    /// The `DescriptionChanged` signal for one commit, sent right after its `Changed` signal: nil when the commit
    /// registered, replaced or removed no schema.
    public static func descriptionChangedSignal(_ change: CommittedChange) -> DBusMessage? {
        Settings1.DescriptionChangedSignal(keys: change.describedKeys, serial: change.serial, origin: change.origin)?
            .message
    }

    // MARK: - Apply

    /// Whether an `Apply` is prepared on the hand-off queue (``WriteHandOff``) rather than on the connection's
    /// thread: when it resets a directory, or writes more keys than a small commit holds.
    static func applyIsSlow(_ request: Settings1.ApplyRequest) -> Bool {
        request.sets.count + request.resets.count > DurableStore.inlineCommitLimit
            || request.resets.contains { if case .directory = $0 { true } else { false } }
    }

    // MARK: - SetFromString

    /// The longest text `SetFromString` parses, in UTF-8 bytes: 8 MiB, eight times the largest value (the
    /// text of a byte array takes about six bytes per element). Longer text is refused before it is parsed.
    static let maximumTextSize = 8 * SettingsBusNames.maximumValueSize

    /// Text up to this many bytes is parsed on the connection's thread (a few microseconds); longer text on the
    /// hand-off queue (``WriteHandOff``), so that the connection goes on serving other clients while it is
    /// parsed, and writes still take effect in the order they arrived.
    static let inlineParseLimit = 16 * 1024

    // MARK: - Replies

    /// Returns a reply that fits in one message on any bus, or throws `TooLarge` for one that does not.
    static func fitting<Reply: Settings1.MessageBody>(_ reply: Reply, _ what: String) throws(SettingsError) -> Reply {
        let size = reply.body.reduce(0) { $0 + $1.approximateSize }
        guard size <= SettingsBusNames.maximumReplySize else {
            throw .tooLarge(
                "\(what) take about \(size) bytes, more than the \(SettingsBusNames.maximumReplySize) bytes (32 MiB) "
                    + "the broker sends in one reply; read a smaller directory or fewer keys at a time")
        }
        return reply
    }

    static func origin(_ call: DBusMethodCall) -> String {
        call.sender?.rawValue ?? ""
    }
}
