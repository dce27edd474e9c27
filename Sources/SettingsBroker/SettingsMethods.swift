// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The methods of `io.github.settingsbus.Settings1`: one function per method, wired to its name by ``table``.
///
/// Each function takes the call and its request, already read from the arguments by its request type in
/// ``SettingsModel/Settings1`` (a call that does not fit is answered with the error the request type names),
/// and returns its reply. Reads answer from the store's committed state; writes return the changeset that
/// ``WritePath`` validates, commits, answers and announces.
struct SettingsMethods: Sendable {
    let store: DurableStore
    let writes: WritePath
    let secretReaders: SecretReaders
    let activity: @Sendable () -> Void
    let moreStatus: @Sendable () -> [String: DBusValue]
    /// Who calls (``PeerIdentities``) and what sandboxed apps may read; nil for an interface that confines no
    /// caller (tests of the methods alone).
    let confinement: Confinement?
    /// Where writes that would hold up the connection's thread are prepared, in order (``WriteHandOff``).
    let handOff = WriteHandOff()

    /// Every method, by name, with how it runs: `immediate` on the connection's thread (no task, no wait),
    /// `write` through the write path in the order the connection read it, `task` in a task of its own.
    var table: [DBusMethod] {
        [
            immediate(Settings1.GetRequest.self, get),
            immediate(Settings1.GetManyRequest.self, getMany),
            task(Settings1.ReadTreeRequest.self, readTree),
            task(Settings1.ListRequest.self, list),
            write(Settings1.SetRequest.self, set),
            // A long text is parsed off the connection's thread (see ``SettingsInterface/inlineParseLimit``).
            write(
                Settings1.SetFromStringRequest.self, slow: { $0.text.utf8.count > SettingsInterface.inlineParseLimit },
                setFromString),
            // A large Apply, or one that resets a directory (which collects every key below it), is prepared
            // off the connection's thread, in line with the other writes.
            write(Settings1.ApplyRequest.self, slow: SettingsInterface.applyIsSlow, apply),
            write(Settings1.ResetRequest.self, slow: { if case .directory = $0.location { true } else { false } }, reset),
            write(Settings1.RegisterRequest.self, reply: { _ in Settings1.EmptyReply() }, register),
            write(Settings1.UnregisterRequest.self, unregister),
            task(Settings1.DescribeRequest.self, describe),
            task(Settings1.StatusRequest.self, status),
            task(Settings1.HistoryRequest.self, history),
            task(Settings1.LocksRequest.self, locks),
            task(Settings1.ReadTreeWithoutSchemaDefaultsRequest.self, readTreeWithoutSchemaDefaults),
            task(Settings1.ReadTreeLayersRequest.self, readTreeLayers),
        ]
    }

    // MARK: - Reads

    func get(_ call: DBusMethodCall, _ request: Settings1.GetRequest) throws -> Settings1.ValueReply {
        try confine(call) { app, shared in app.reads(request.key, shared: shared) ? nil : "\(request.key)" }
        guard let value = try store.get(request.key, includingSecret: readsSecrets(call)) else {
            throw secretWithheld(call, [request.key])
        }
        return Settings1.ValueReply(value: value)
    }

    func getMany(_ call: DBusMethodCall, _ request: Settings1.GetManyRequest) throws -> Settings1.ValuesReply {
        try confine(call) { app, shared in
            request.keys.first { !app.reads($0, shared: shared) }.map { "\($0)" }
        }
        let (values, serial, withheld) = store.getMany(request.keys, includingSecrets: readsSecrets(call))
        if !withheld.isEmpty { throw secretWithheld(call, withheld) }
        return try SettingsInterface.fitting(
            Settings1.ValuesReply(values: Settings1.ValueMap(values), serial: serial),
            "the values of \(request.keys.count) keys")
    }

    /// The values of secret keys are left out for a caller that may not read them (asked for its user only
    /// when the directory holds one).
    func readTree(_ call: DBusMethodCall, _ request: Settings1.ReadTreeRequest) throws -> Settings1.ValuesReply {
        try readTree(call, request.directory, schemaDefaults: true)
    }

    /// `ReadTree` without the keys that read their schema's default.
    func readTreeWithoutSchemaDefaults(
        _ call: DBusMethodCall, _ request: Settings1.ReadTreeWithoutSchemaDefaultsRequest
    ) throws -> Settings1.ValuesReply {
        try readTree(call, request.directory, schemaDefaults: false)
    }

    func readTreeLayers(_ call: DBusMethodCall, _ request: Settings1.ReadTreeLayersRequest) throws
        -> Settings1.LayersReply
    {
        try confine(call, directory: request.directory)
        let layers = store.readTreeLayers(request.directory, includingSecrets: readsSecrets(call))
        if layers.withheld, call.senderUnixUser == nil { throw DBusMethodCall.SenderUnixUserNeeded() }
        return try SettingsInterface.fitting(
            Settings1.LayersReply(
                user: Settings1.ValueMap(layers.user), administrator: Settings1.ValueMap(layers.administrator),
                serial: layers.serial),
            "the values under \(request.directory)")
    }

    private func readTree(_ call: DBusMethodCall, _ directory: SettingDirectory, schemaDefaults: Bool) throws
        -> Settings1.ValuesReply
    {
        try confine(call, directory: directory)
        let (values, serial, withheld) = store.readTree(
            directory, includingSecrets: readsSecrets(call), schemaDefaults: schemaDefaults)
        if withheld, call.senderUnixUser == nil { throw DBusMethodCall.SenderUnixUserNeeded() }
        return try SettingsInterface.fitting(
            Settings1.ValuesReply(values: Settings1.ValueMap(values), serial: serial), "the values under \(directory)")
    }

    func locks(_ call: DBusMethodCall, _ request: Settings1.LocksRequest) throws -> Settings1.LocksReply {
        try confine(call, directory: request.directory)
        return try SettingsInterface.fitting(
            Settings1.LocksReply(locks: store.locks(under: request.directory).map(\.rawValue)),
            "the locks under \(request.directory)")
    }

    func list(_ call: DBusMethodCall, _ request: Settings1.ListRequest) throws -> Settings1.ListReply {
        try confine(call, directory: request.directory)
        return try SettingsInterface.fitting(
            Settings1.ListReply(children: store.list(request.directory)), "the children of \(request.directory)")
    }

    // Every reply is size-checked, as reads are: what Describe and Status report is bounded where it is made
    // (values, problem texts, lists of refusals), and a reply that still would not fit is refused with
    // TooLarge rather than sent, which would get the broker disconnected from the bus.

    func describe(_ call: DBusMethodCall, _ request: Settings1.DescribeRequest) throws -> Settings1.DescribeReply {
        try confine(call) { app, shared in app.reads(request.key, shared: shared) ? nil : "\(request.key)" }
        return try SettingsInterface.fitting(
            SchemaCoding.describe(try store.describe(request.key)), "the description of \(request.key)")
    }

    func status(_ call: DBusMethodCall, _: Settings1.StatusRequest) throws -> Settings1.StatusReply {
        if try app(call) != nil {
            // A sandboxed app learns whether the broker serves, and nothing of the store, its files or other apps.
            let fields = store.status().filter { Self.sandboxedStatusFields.contains($0.key) }
            return Settings1.StatusReply(fields: fields)
        }
        return try SettingsInterface.fitting(
            Settings1.StatusReply(fields: store.status().merging(moreStatus()) { own, _ in own }),
            "the broker's status")
    }

    /// Read from the store file on a connection of its own; a writer whose process was found but not yet
    /// recorded there is named from memory.
    func history(_ call: DBusMethodCall, _ request: Settings1.HistoryRequest) async throws -> Settings1.HistoryReply {
        let app = try app(call)
        if let app, let shared = confinement?.shared.list {
            let allowed: Bool
            switch request.location {
            case .key(let key): allowed = app.reads(key, shared: shared)
            case .directory(let directory): allowed = app.reads(directory, shared: shared)
            }
            guard allowed else { throw app.refusal("the history of \(request.location)") }
        }
        var commits = try await store.history(request)
        if let app, let shared = confinement?.shared.list {
            // A commit of several apps' keys shows only what this app may read, and nothing of who wrote it.
            commits = commits.compactMap { commit in
                var commit = commit
                commit.changes = commit.changes.filter { change in
                    (try? SettingPath(change.key)).map { app.reads($0, shared: shared) } ?? false
                }
                guard !commit.changes.isEmpty else { return nil }
                if !(commit.changes.allSatisfy { (try? SettingPath($0.key)).map { app.writes($0, shared: shared) } ?? false }) {
                    commit.writer = ""
                    commit.process = ""
                    commit.pid = 0
                }
                return commit
            }
        }
        if let writers = writes.writers {
            for index in commits.indices where commits[index].process.isEmpty {
                if let process = writers.known(commits[index].writer) {
                    commits[index].process = process.name
                    commits[index].pid = process.pid
                }
            }
        }
        return try SettingsInterface.fitting(Settings1.HistoryReply(commits: commits), "the history asked for")
    }

    // MARK: - Writes

    func set(_ call: DBusMethodCall, _ request: Settings1.SetRequest) throws(SettingsError) -> Changeset {
        try confine(call) { app, shared in app.writes(request.key, shared: shared) ? nil : "\(request.key)" }
        return Changeset(sets: [(request.key, request.value)], origin: SettingsInterface.origin(call))
    }

    /// A text too long to be a value is refused by its size before it is parsed.
    func setFromString(_ call: DBusMethodCall, _ request: Settings1.SetFromStringRequest) throws(SettingsError)
        -> Changeset
    {
        let key = request.key
        try confine(call) { app, shared in app.writes(key, shared: shared) ? nil : "\(key)" }
        let size = request.text.utf8.count
        guard size <= SettingsInterface.maximumTextSize else {
            throw .tooLarge(
                "the text for \(key) is \(size) bytes; SetFromString parses text of at most "
                    + "\(SettingsInterface.maximumTextSize) bytes (8 MiB), and a value is at most "
                    + "\(SettingsBusNames.maximumValueSize) bytes (1 MiB)")
        }
        let value: DBusValue
        do throws(GVariantTextError) {
            value = try GVariantText.parse(request.text, as: store.registeredSchema(key)?.type)
        } catch {
            throw error.settingsError(for: key)
        }
        return Changeset(sets: [(key, value)], origin: SettingsInterface.origin(call))
    }

    func apply(_ call: DBusMethodCall, _ request: Settings1.ApplyRequest) throws(SettingsError) -> Changeset {
        try confine(call) { app, shared in
            if let key = request.sets.first(where: { !app.writes($0.0, shared: shared) })?.0 {
                return "\(key) (in an Apply)"
            }
            return request.resets.first { !app.writes($0, shared: shared) }.map { "\($0) (in an Apply)" }
        }
        var changeset = Changeset(origin: SettingsInterface.origin(call))
        changeset.sets = request.sets
        changeset.resets = request.resets
        changeset.ifSerial = request.options.ifSerial
        return changeset
    }

    func reset(_ call: DBusMethodCall, _ request: Settings1.ResetRequest) throws(SettingsError) -> Changeset {
        try confine(call) { app, shared in app.writes(request.location, shared: shared) ? nil : "\(request.location)" }
        return Changeset(resets: [request.location], origin: SettingsInterface.origin(call))
    }

    func register(_ call: DBusMethodCall, _ request: Settings1.RegisterRequest) throws(SettingsError) -> Changeset {
        let schema = request.schema
        try confine(call) { app, shared in app.writes(request.key, shared: shared) ? nil : "registering \(request.key)" }
        try schema.validate(for: request.key)
        var changeset = Changeset(registrations: [(request.key, schema)], origin: SettingsInterface.origin(call))
        changeset.replacing = request.options.replace
        return changeset
    }

    func unregister(_ call: DBusMethodCall, _ request: Settings1.UnregisterRequest) throws(SettingsError) -> Changeset {
        try confine(call) { app, shared in app.writes(request.key, shared: shared) ? nil : "unregistering \(request.key)" }
        var changeset = Changeset(
            resets: request.removeValue ? [.key(request.key)] : [], origin: SettingsInterface.origin(call))
        changeset.unregistrations = [request.key]
        return changeset
    }

    // MARK: - Sandboxed apps

    /// The `Status` fields a sandboxed app gets.
    static let sandboxedStatusFields: Set<String> = ["health", "writable"]

    /// The confinement of the caller: nil for the host (or an interface that confines no one), the app's for a
    /// sandboxed app (which then, on the sandboxed apps' name, gets the changes it may read one by one).
    ///
    /// - Throws: `AccessDenied` for a caller that looks sandboxed but could not be identified.
    func app(_ call: DBusMethodCall) throws(SettingsError) -> AppConfinement? {
        guard let confinement, let sender = call.sender?.rawValue else { return nil }
        switch confinement.peers.identity(of: sender, pid: call.senderCredentials?.processID) {
        case .host:
            return nil
        case .app(let app):
            if confinement.unicastsChanges, !confinement.peers.listen(sender, as: app) {
                throw .accessDenied(
                    "the broker already sends changes to \(confinement.peers.limit) sandboxed callers, and cannot "
                        + "keep another: the caller is refused rather than left without its changes")
            }
            return app
        case .unproved(let why):
            throw .accessDenied("the caller cannot be identified, so it is refused: \(why)")
        }
    }

    /// Refuses a sandboxed app what `refused` names (a text naming what it may not reach, nil when it may).
    func confine(
        _ call: DBusMethodCall, _ refused: (AppConfinement, SharedKeys.List) -> String?
    ) throws(SettingsError) {
        guard let app = try app(call), let confinement else { return }
        if let what = refused(app, confinement.shared.list) { throw app.refusal(what) }
    }

    /// Refuses a sandboxed app a directory it may not read as a whole.
    func confine(_ call: DBusMethodCall, directory: SettingDirectory) throws(SettingsError) {
        try confine(call) { app, shared in app.reads(directory, shared: shared) ? nil : "\(directory)" }
    }

    // MARK: - Secret values

    /// Whether the caller may read secret values: false until its user is known.
    func readsSecrets(_ call: DBusMethodCall) -> Bool {
        guard let user = call.senderUnixUser else { return false }
        return secretReaders.allows(user)
    }

    /// What a read that withheld the values of secret keys throws: `SenderUnixUserNeeded` while the caller's
    /// user is not known, then `AccessDenied`.
    func secretWithheld(_ call: DBusMethodCall, _ keys: [SettingPath]) -> any Error {
        guard let user = call.senderUnixUser else { return DBusMethodCall.SenderUnixUserNeeded() }
        let named = keys.prefix(3).map(\.rawValue).joined(separator: ", ") + (keys.count > 3 ? ", …" : "")
        return SettingsError.accessDenied(
            "\(named) \(keys.count == 1 ? "is a secret key" : "are secret keys"): user \(user) may not read "
                + "\(keys.count == 1 ? "its value" : "their values"); the broker gives secret values only to "
                + "root, its own user and the users named by its --secret-readers")
    }

    // MARK: - How methods run

    /// A method answered from the store's committed state on the connection's thread (no task, no wait). Its
    /// body may also throw `SenderUnixUserNeeded` (``secretWithheld(_:_:)``): the connection then runs it again
    /// once it knows the caller's user.
    private func immediate<Request: Settings1.Request>(
        _: Request.Type, _ body: @escaping @Sendable (DBusMethodCall, Request) throws -> Request.Reply
    ) -> DBusMethod {
        DBusMethod(
            name: Request.method, inputs: Request.inputs, outputs: Request.outputs,
            immediate: { [activity] call in
                activity()
                do {
                    return try body(call, try Request(call.arguments)).body
                } catch let error as SettingsError {
                    throw error.dbusError
                }
            })
    }

    /// A method answered in a task of its own.
    private func task<Request: Settings1.Request>(
        _: Request.Type, _ body: @escaping @Sendable (DBusMethodCall, Request) async throws -> Request.Reply
    ) -> DBusMethod {
        DBusMethod(name: Request.method, inputs: Request.inputs, outputs: Request.outputs) { [activity] call in
            activity()
            do {
                return try await body(call, try Request(call.arguments)).body
            } catch let error as SettingsError {
                throw error.dbusError
            }
        }
    }

    /// A write whose reply is its serial.
    private func write<Request: Settings1.Request>(
        _: Request.Type,
        slow: @escaping @Sendable (Request) -> Bool = { _ in false },
        _ changeset: @escaping @Sendable (DBusMethodCall, Request) throws(SettingsError) -> Changeset
    ) -> DBusMethod where Request.Reply == Settings1.SerialReply {
        write(Request.self, slow: slow, reply: { Settings1.SerialReply(serial: $0) }, changeset)
    }

    /// A write: its changeset is made on the connection's thread and goes through the write path, which
    /// answers the call where the commit runs (``WritePath/write(_:for:placement:)``): a small commit on the
    /// connection's thread once the calls read so far are dispatched (``AfterDispatch``), anything else on the
    /// commit queue. The changeset is made on the hand-off queue instead when `slow` says so, or when a write
    /// handed off before it still waits (``WriteHandOff``); a call that does not fit is answered where its
    /// changeset would have been made, so in order.
    ///
    /// Every method that writes is made here, so that one connection's writes of any kind take effect in the
    /// order it sent them: an `Apply` or a `Register` is never overtaken by a `Set` sent after it (a `Register`
    /// of a secret key then a `Set` of it must not broadcast the value).
    private func write<Request: Settings1.Request>(
        _: Request.Type,
        slow: @escaping @Sendable (Request) -> Bool = { _ in false },
        reply makeReply: @escaping @Sendable (UInt64) -> Request.Reply,
        _ changeset: @escaping @Sendable (DBusMethodCall, Request) throws(SettingsError) -> Changeset
    ) -> DBusMethod {
        DBusMethod(
            name: Request.method, inputs: Request.inputs, outputs: Request.outputs,
            deferred: { [activity, writes, handOff] call, reply in
                activity()
                let request = Result { () throws(SettingsError) in try Request(call.arguments) }
                @Sendable func stage(placement: (any CommitPlacement)?) {
                    do throws(SettingsError) {
                        writes.write(
                            try changeset(call, try request.get()),
                            for: .call(reply, origin: SettingsInterface.origin(call)) { makeReply($0).body },
                            placement: placement)
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
}
