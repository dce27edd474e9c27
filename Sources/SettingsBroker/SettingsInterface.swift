// SPDX-License-Identifier: Apache-2.0

public import DBus
import SettingsModel

/// The `io.github.settingsbus.Settings1` interface: the D-Bus face of a ``DurableStore``.
///
/// Every method checks its arguments before touching the store and answers failures with the
/// `io.github.settingsbus.Settings1.Error.*` names of ``SettingsError``. The interface XML in `dbus/` is what
/// ``interface(store:)`` introspects as.
public enum SettingsInterface {
    /// The interface version reported by the `Version` property.
    public static let version: UInt32 = 1

    private static let stringMap = DBusType.dictionary(key: .string, value: .variant)

    /// Builds the interface over a store.
    ///
    /// - Parameters:
    ///   - secretReaders: the users given the values of secret keys (``SecretReaders``); any other caller gets
    ///     `AccessDenied` from `Get` and `GetMany` of a secret key, and `ReadTree` without them.
    ///   - activity: called at the start of every method call (the broker's idle timer uses it).
    ///   - moreStatus: fields that `Status` reports beside the store's own (the schema files).
    public static func interface(
        store: DurableStore, secretReaders: SecretReaders = SecretReaders(),
        activity: @escaping @Sendable () -> Void = {},
        moreStatus: @escaping @Sendable () -> [String: DBusValue] = { [:] }
    ) -> DBusInterface {
        func method(
            _ name: MemberName, _ inputs: [DBusArgument], _ outputs: [DBusArgument],
            _ body: @escaping @Sendable (DBusMethodCall) async throws(SettingsError) -> [DBusValue]
        ) -> DBusMethod {
            DBusMethod(name: name, inputs: inputs, outputs: outputs) { call in
                activity()
                do throws(SettingsError) {
                    return try await body(call)
                } catch {
                    throw error.dbusError
                }
            }
        }
        /// A method answered from the store's committed state on the connection's thread (no task, no wait).
        /// Its body may also throw `SenderUnixUserNeeded` (``secretWithheld(_:_:)``): the connection then runs it
        /// again once it knows the caller's user.
        func immediate(
            _ name: MemberName, _ inputs: [DBusArgument], _ outputs: [DBusArgument],
            _ body: @escaping @Sendable (DBusMethodCall) throws -> [DBusValue]
        ) -> DBusMethod {
            DBusMethod(
                name: name, inputs: inputs, outputs: outputs,
                immediate: { call in
                    activity()
                    do {
                        return try body(call)
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
        /// it still waits (see ``WriteHandOff``).
        func write(
            _ name: MemberName, _ inputs: [DBusArgument],
            slow: @escaping @Sendable (DBusMethodCall) -> Bool = { _ in false },
            _ changeset: @escaping @Sendable (DBusMethodCall) throws(SettingsError) -> Changeset
        ) -> DBusMethod {
            DBusMethod(
                name: name, inputs: inputs, outputs: [.init("serial", .uint64)],
                deferred: { call, reply in
                    activity()
                    @Sendable func stage(placement: (any CommitPlacement)?) {
                        do throws(SettingsError) {
                            store.submit(try changeset(call), placement: placement) { result in
                                reply.send(result.map { [.uint64($0)] }.mapError { $0.dbusError })
                            }
                        } catch {
                            reply.send(.failure(error.dbusError))
                        }
                    }
                    if handOff.isBusy || slow(call) {
                        handOff.run { stage(placement: nil) }
                    } else {
                        stage(placement: AfterDispatch(reply: reply))
                    }
                })
        }
        let methods: [DBusMethod] = [
            immediate("Get", [.init("key", .string)], [.init("value", .variant)]) { call in
                let key = try key(call.arguments[0])
                guard let value = try store.get(key, includingSecret: readsSecrets(call)) else {
                    throw secretWithheld(call, [key])
                }
                return [.variant(value)]
            },
            immediate(
                "GetMany", [.init("keys", .array(.string))], [.init("values", stringMap), .init("serial", .uint64)]
            ) { call in
                let keys = try strings(call.arguments[0]).map { text throws(SettingsError) in try SettingPath(text) }
                let (values, serial, withheld) = store.getMany(keys, includingSecrets: readsSecrets(call))
                if !withheld.isEmpty { throw secretWithheld(call, withheld) }
                return try fitting([valueMap(values), .uint64(serial)], "the values of \(keys.count) keys")
            },
            // A task, like the other methods but Get and GetMany; the values of secret keys are left out for a
            // caller that may not read them (asked for its user only when the directory holds one).
            DBusMethod(
                name: "ReadTree", inputs: [.init("dir", .string)],
                outputs: [.init("values", stringMap), .init("serial", .uint64)]
            ) { call in
                activity()
                do {
                    let dir = try directory(call.arguments[0])
                    let (values, serial, withheld) = store.readTree(dir, includingSecrets: readsSecrets(call))
                    if withheld, call.senderUnixUser == nil { throw DBusMethodCall.SenderUnixUserNeeded() }
                    return try fitting([valueMap(values), .uint64(serial)], "the values under \(dir)")
                } catch let error as SettingsError {
                    throw error.dbusError
                }
            },
            method("List", [.init("dir", .string)], [.init("children", .array(.string))]) { call throws(SettingsError) in
                let dir = try directory(call.arguments[0])
                return try fitting([.array(.string, store.list(dir).map(DBusValue.string))], "the children of \(dir)")
            },
            write("Set", [.init("key", .string), .init("value", .variant)]) { call throws(SettingsError) in
                guard case .variant(let value) = call.arguments[1] else {
                    throw .invalidValue("Set takes a variant as its second argument")
                }
                return Changeset(sets: [(try key(call.arguments[0]), value)], origin: origin(call))
            },
            // A long text is parsed off the connection's thread (see ``inlineParseLimit``); one too long to be a
            // value is refused by its size before it is parsed.
            write("SetFromString", [.init("key", .string), .init("text", .string)], slow: { call in
                guard case .string(let text)? = call.arguments.dropFirst().first else { return false }
                return text.utf8.count > inlineParseLimit
            }) { call throws(SettingsError) in
                let key = try key(call.arguments[0])
                guard case .string(let text) = call.arguments[1] else {
                    throw .invalidValue("SetFromString takes a string as its second argument")
                }
                let size = text.utf8.count
                guard size <= maximumTextSize else {
                    throw .tooLarge(
                        "the text for \(key) is \(size) bytes; SetFromString parses text of at most \(maximumTextSize) "
                            + "bytes (8 MiB), and a value is at most \(SettingsBusNames.maximumValueSize) bytes (1 MiB)")
                }
                let value: DBusValue
                do throws(GVariantTextError) {
                    value = try GVariantText.parse(text, as: store.registeredSchema(key)?.type)
                } catch {
                    throw error.settingsError(for: key)
                }
                return Changeset(sets: [(key, value)], origin: origin(call))
            },
            method(
                "Apply", [.init("set", stringMap), .init("reset", .array(.string)), .init("options", stringMap)],
                [.init("serial", .uint64)]
            ) { call throws(SettingsError) in
                var changeset = Changeset(origin: origin(call))
                for (name, value) in try variantMap(call.arguments[0]) {
                    changeset.sets.append((try SettingPath(name), value))
                }
                changeset.resets = try strings(call.arguments[1]).map { text throws(SettingsError) in
                    try SettingLocation(text)
                }
                for (name, value) in try variantMap(call.arguments[2]) {
                    switch (name, value) {
                    case ("if-serial", .uint64(let serial)): changeset.ifSerial = serial
                    case ("if-serial", _):
                        throw .invalidValue("option if-serial takes a uint64 (t), not '\(value.type)'")
                    default:
                        throw .invalidValue("unknown option '\(name)'; Apply knows: if-serial")
                    }
                }
                return [.uint64(try await store.apply(changeset))]
            },
            // A directory's reset collects every key below it: not on the connection's thread.
            write("Reset", [.init("keyOrDir", .string)], slow: { call in
                if case .string(let text) = call.arguments.first { return text.hasSuffix("/") }
                return false
            }) { call throws(SettingsError) in
                guard case .string(let text) = call.arguments[0] else {
                    throw .invalidKey("Reset takes a key or directory string")
                }
                return Changeset(resets: [try SettingLocation(text)], origin: origin(call))
            },
            method(
                "Register",
                [.init("key", .string), .init("signature", .string), .init("default", .variant), .init("options", stringMap)],
                []
            ) { call throws(SettingsError) in
                let key = try key(call.arguments[0])
                let (schema, replacing) = try SchemaCoding.registration(
                    signature: call.arguments[1], defaultValue: call.arguments[2], options: try variantMap(call.arguments[3]),
                    for: key)
                var changeset = Changeset(registrations: [(key, schema)], origin: origin(call))
                changeset.replacing = replacing
                _ = try await store.apply(changeset)
                return []
            },
            method("Describe", [.init("key", .string)], [.init("description", stringMap)]) { call throws(SettingsError) in
                [SchemaCoding.describe(try store.describe(try key(call.arguments[0])))]
            },
            method("Status", [], [.init("status", stringMap)]) { _ throws(SettingsError) in
                [valueMap(store.status().merging(moreStatus()) { own, _ in own })]
            },
        ]
        return DBusInterface(
            name: SettingsBusNames.interface,
            methods: methods,
            signals: [
                DBusSignal(
                    name: "Changed",
                    arguments: [
                        .init("path", .string), .init("values", stringMap), .init("removed", .array(.string)),
                        .init("serial", .uint64), .init("origin", .string),
                    ])
            ],
            properties: [
                DBusProperty(name: "Serial", type: .uint64, changeSignal: .none) { .uint64(store.serial) },
                DBusProperty(name: "Version", type: .uint32, changeSignal: .constant) { .uint32(version) },
            ])
    }

    /// The `Changed` signal for one commit.
    ///
    /// Keys registered as secret appear in neither `values` nor `removed`: the signal's `path` still covers
    /// them, so a watcher of such a key sees that something under its path changed and re-reads it. A commit
    /// whose values and removed keys would take more than ``SettingsModel/SettingsBusNames/maximumSignalSize``
    /// is announced the same way for every key it changed: `values` and `removed` empty, `path` covering them.
    public static func changedSignal(_ change: CommittedChange) -> DBusMessage {
        var values = DBusValue.dictionary(
            key: .string, value: .variant,
            change.values.map { DBusDictEntry(key: .string($0.key), value: .variant($0.value)) })
        var removed = DBusValue.array(.string, change.removed.map(DBusValue.string))
        if values.approximateSize + removed.approximateSize > SettingsBusNames.maximumSignalSize {
            values = .dictionary(key: .string, value: .variant, [])
            removed = .array(.string, [])
        }
        return .signal(
            path: SettingsBusNames.objectPath, interface: SettingsBusNames.interface, member: "Changed",
            body: [.string(change.path.rawValue), values, removed, .uint64(change.serial), .string(change.origin)])
    }

    // MARK: - SetFromString

    /// The longest text `SetFromString` parses, in UTF-8 bytes: 8 MiB, eight times the largest value (the
    /// text of a byte array takes about six bytes per element). Longer text is refused before it is parsed.
    static let maximumTextSize = 8 * SettingsBusNames.maximumValueSize

    /// Text up to this many bytes is parsed on the connection's thread (a few microseconds); longer text on the
    /// hand-off queue (``WriteHandOff``), so that the connection goes on serving other clients while it is
    /// parsed, and writes still take effect in the order they arrived.
    static let inlineParseLimit = 16 * 1024

    // MARK: - Argument helpers

    static func key(_ value: DBusValue) throws(SettingsError) -> SettingPath {
        guard case .string(let text) = value else { throw .invalidKey("a key is a string") }
        return try SettingPath(text)
    }

    static func directory(_ value: DBusValue) throws(SettingsError) -> SettingDirectory {
        guard case .string(let text) = value else { throw .invalidKey("a directory is a string") }
        return try SettingDirectory(text)
    }

    static func strings(_ value: DBusValue) throws(SettingsError) -> [String] {
        guard case .array(.string, let elements) = value else { throw .invalidValue("a list of strings was expected") }
        return elements.compactMap { element in
            if case .string(let text) = element { return text }
            return nil
        }
    }

    static func variantMap(_ value: DBusValue) throws(SettingsError) -> [(String, DBusValue)] {
        guard case .dictionary(.string, .variant, let entries) = value else {
            throw .invalidValue("a dictionary a{sv} was expected")
        }
        return entries.compactMap { entry in
            guard case .string(let name) = entry.key, case .variant(let inner) = entry.value else { return nil }
            return (name, inner)
        }
    }

    /// Returns a reply that fits in one message on any bus, or throws `TooLarge` for one that does not.
    static func fitting(_ reply: [DBusValue], _ what: String) throws(SettingsError) -> [DBusValue] {
        let size = reply.reduce(0) { $0 + $1.approximateSize }
        guard size <= SettingsBusNames.maximumReplySize else {
            throw .tooLarge(
                "\(what) take about \(size) bytes, more than the \(SettingsBusNames.maximumReplySize) bytes (32 MiB) "
                    + "the broker sends in one reply; read a smaller directory or fewer keys at a time")
        }
        return reply
    }

    static func valueMap(_ values: [String: DBusValue]) -> DBusValue {
        .dictionary(
            key: .string, value: .variant,
            values.sorted { $0.key < $1.key }.map { DBusDictEntry(key: .string($0.key), value: .variant($0.value)) })
    }

    static func origin(_ call: DBusMethodCall) -> String {
        call.sender?.rawValue ?? ""
    }
}
