// SPDX-License-Identifier: Apache-2.0

public import DBus
import Glibc

/// The names and limits of version 1 of the settings bus D-Bus contract.
///
/// The bus name, interface and object path all end in `Settings1`, as the D-Bus API Design Guidelines advise,
/// so an incompatible version 2 can live next to version 1. The methods, their arguments and the signal are
/// ``Settings1``.
///
/// ```swift
/// let request = Settings1.GetRequest(key: try SettingPath("/org/example/theme"))
/// let reply = try await connection.call(
///     destination: SettingsBusNames.busName, path: SettingsBusNames.objectPath,
///     interface: SettingsBusNames.interface, member: Settings1.GetRequest.method, arguments: request.body)
/// let value = try Settings1.GetRequest.reply(reply).value
/// ```
public enum SettingsBusNames {
    /// The well-known bus name the broker owns: `io.github.settingsbus.Settings1`.
    public static let busName: BusName = "io.github.settingsbus.Settings1"

    /// The name the broker owns for sandboxed apps, on a connection of its own:
    /// `io.github.settingsbus.SandboxedSettings1`. It serves the same object and interface as ``busName``, and
    /// never broadcasts: a sandboxed caller gets the changes it may read as signals sent to it alone. A sandbox
    /// is given this name to talk to (Flatpak's `--talk-name=io.github.settingsbus.SandboxedSettings1`), so
    /// that through `xdg-dbus-proxy` it sees no other app's `Changed` broadcast. Every caller of either name
    /// is identified and a sandboxed app confined to its own keys (decision 0033).
    public static let sandboxedBusName: BusName = "io.github.settingsbus.SandboxedSettings1"

    /// The name a client calls the broker by: ``sandboxedBusName`` in a Flatpak sandbox (where `/.flatpak-info`
    /// exists), whose changes then reach it alone; ``busName`` everywhere else.
    public static var clientBusName: BusName {
        access("/.flatpak-info", F_OK) == 0 ? sandboxedBusName : busName
    }

    /// The path of the broker's one object: `/io/github/settingsbus/Settings1`.
    public static let objectPath: ObjectPath = "/io/github/settingsbus/Settings1"

    /// The interface of the broker's object: `io.github.settingsbus.Settings1`.
    public static let interface: InterfaceName = "io.github.settingsbus.Settings1"

    /// The prefix of every settings bus error name: `io.github.settingsbus.Settings1.Error.`.
    public static let errorPrefix = "io.github.settingsbus.Settings1.Error."

    /// The longest key or directory, in UTF-8 bytes: 1024 (the same as ``SettingPath/maximumLength``).
    public static let maximumKeyLength = 1024

    /// The largest value the broker stores, in bytes of its D-Bus marshalled form: 1 MiB.
    ///
    /// The size is measured with `DBusValue.approximateSize`, which bounds the marshalled size from
    /// above (padding is counted at its worst), so a value that passes fits well inside a D-Bus message.
    public static let maximumValueSize = 1 << 20

    /// The deepest nesting of containers, variants included, of a value the broker stores: 60.
    ///
    /// D-Bus allows 64 levels in a whole message. A value nested 62–63 levels deep still fits a `Set` call,
    /// but the broker could never send it back: inside the `a{sv}` of a `Changed` signal or a `GetMany` reply
    /// it gains three levels (array, dictionary entry, variant) and the bus daemon would disconnect the broker.
    /// Refusing such values at write time keeps every stored value deliverable. Depth is counted as
    /// `DBusValue.nestingDepth` counts it.
    public static let maximumValueDepth = 60

    /// The largest reply the broker sends, in bytes as `DBusValue.approximateSize` counts them: 32 MiB.
    ///
    /// A bus daemon disconnects a peer that sends a message over its limit: 32 MiB by default on the system bus,
    /// 128 MiB (the protocol's maximum) on the session bus. One read of a large store (`ReadTree` of `/`) would
    /// then cut the broker off from every client; it is refused with `TooLarge` instead.
    public static let maximumReplySize = 32 << 20

    /// The most a `Changed` signal carries of values and removed keys, in bytes as
    /// `DBusValue.approximateSize` counts them: 4 MiB.
    ///
    /// A signal goes to every watcher of its path, and a bus daemon disconnects a peer that sends a message over
    /// its limit. A commit whose new values would take more (a `Reset` of a directory of keys with large
    /// defaults, an `Apply` of many large values) is announced by a `Changed` signal with empty `values` and
    /// `removed`: its `path` still covers every changed key, and watchers read what changed. One value (at most
    /// ``maximumValueSize``) always fits.
    public static let maximumSignalSize = 4 << 20

    /// The most the values of one schema (its default, choices and range) take together, in bytes as
    /// `DBusValue.approximateSize` counts them: 1 MiB, the same as one value, so that `Describe` of
    /// any key fits in its reply.
    public static let maximumSchemaSize = 1 << 20
}
