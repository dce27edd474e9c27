// SPDX-License-Identifier: Apache-2.0

public import DBus
import SettingsModel

/// The `io.github.settingsbus.Settings1` interface: the D-Bus face of a ``DurableStore``.
///
/// Every method checks its arguments before touching the store and answers failures with the
/// `io.github.settingsbus.Settings1.Error.*` names of ``SettingsError``. The interface XML in `dbus/` is what
/// ``interface(writes:secretReaders:activity:moreStatus:)`` introspects as. Each method is one function of
/// ``SettingsMethods``; the table there wires them to their names.
public enum SettingsInterface {
    /// The interface version reported by the `Version` property, ``SettingsModel/Settings1/version``.
    public static let version: UInt32 = Settings1.version

    /// Builds the interface over the store a write path writes to.
    ///
    /// - Parameters:
    ///   - writes: the store's write path; every method that writes goes through it, reads go to its store.
    ///   - secretReaders: the users given the values of secret keys (``SecretReaders``); any other caller gets
    ///     `AccessDenied` from `Get` and `GetMany` of a secret key, and `ReadTree` without them.
    ///   - activity: called at the start of every method call (the broker's idle timer uses it).
    ///   - moreStatus: fields that `Status` reports beside the store's own (the schema files).
    public static func interface(
        writes: WritePath, secretReaders: SecretReaders = SecretReaders(),
        activity: @escaping @Sendable () -> Void = {},
        moreStatus: @escaping @Sendable () -> [String: DBusValue] = { [:] }
    ) -> DBusInterface {
        interface(
            writes: writes, secretReaders: secretReaders, activity: activity, moreStatus: moreStatus, confinement: nil)
    }

    /// Builds the interface, confining sandboxed callers when `confinement` is given: every call is then
    /// dispatched knowing who makes it (``DBus/DBusInterface/identifiesCallers``).
    static func interface(
        writes: WritePath, secretReaders: SecretReaders, activity: @escaping @Sendable () -> Void,
        moreStatus: @escaping @Sendable () -> [String: DBusValue], confinement: Confinement?
    ) -> DBusInterface {
        let store = writes.store
        let methods = SettingsMethods(
            store: store, writes: writes, secretReaders: secretReaders, activity: activity, moreStatus: moreStatus,
            confinement: confinement)
        return DBusInterface(
            name: SettingsBusNames.interface,
            methods: methods.table,
            signals: Settings1.signals.map { DBusSignal(name: $0.member, arguments: $0.arguments) },
            properties: [
                DBusProperty(
                    name: Settings1.Property.serial.name, type: Settings1.Property.serial.type, changeSignal: .none
                ) { .uint64(store.serial) },
                DBusProperty(
                    name: Settings1.Property.version.name, type: Settings1.Property.version.type,
                    changeSignal: .constant
                ) { .uint32(version) },
            ],
            identifiesCallers: confinement != nil)
    }

    /// The `Changed` signal for one commit.
    ///
    /// Keys registered as secret appear in neither `values` nor `removed`: the signal's `path` still covers
    /// them, so a watcher of such a key sees that something under its path changed and re-reads it. A commit
    /// whose values and removed keys would take more than ``SettingsModel/SettingsBusNames/maximumSignalSize``
    /// is announced the same way for every key it changed: `values` and `removed` empty, `path` covering them.
    static func changedSignal(_ change: CommittedChange) -> DBusMessage {
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
    static func descriptionChangedSignal(_ change: CommittedChange) -> DBusMessage? {
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
