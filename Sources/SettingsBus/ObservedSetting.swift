// SPDX-License-Identifier: Apache-2.0

public import Observation
public import SettingsModel

/// An `@Observable` object whose ``value`` follows a key live, for UI code.
///
/// It starts with the local copy of the value (or the key's default) and follows every change, whichever
/// process makes it; SwiftUI-style observation (`withObservationTracking`) sees each one. Preload the keys a
/// window shows (`settings.preload(...)`) before making it, so that it starts with
/// the stored value rather than the default. ``status`` says whether the broker is reached, and ``isWritable``
/// whether the key may be written (an administrator's lock makes it false at once).
///
/// ```swift
/// @MainActor @Observable final class EditorSettings {
///     let colorScheme: ObservedSetting<ColorScheme>
///     let fontSize: ObservedSetting<Int>
///     init(settings: any SettingsStore) {
///         colorScheme = ObservedSetting(.colorScheme, in: settings)
///         fontSize = ObservedSetting(.fontSize, in: settings)
///     }
/// }
/// // in a view: Text("\(editor.fontSize.value) pt")
/// // on a button: try await editor.fontSize.set(14)
/// ```
///
/// - Important: The object stops following the key when it is released.
@MainActor
@Observable
public final class ObservedSetting<Value: SettingValue> {
    /// The key's current value: the default while nothing is known (the broker cannot be reached).
    public private(set) var value: Value
    /// Whether the store reaches its broker (``SettingsStore/connectionStatuses()``).
    public private(set) var status: ConnectionStatus
    /// Whether the key may be written: false while an administrator locks it (``SettingDescription/isWritable``,
    /// followed with ``SettingsStore/descriptions(for:)``). A control of the key is disabled while it is false.
    public private(set) var isWritable = true
    /// The key followed.
    @ObservationIgnored public let key: SettingKey<Value>
    @ObservationIgnored private let store: any SettingsStore
    @ObservationIgnored private let follower: FollowerTask

    /// Follows a key of a store.
    public init(_ key: SettingKey<Value>, in store: any SettingsStore) {
        self.key = key
        self.store = store
        self.value = store.cached(key) ?? key.defaultValue
        self.status = store.connectionStatus
        let values = store.values(for: key)
        let statuses = store.connectionStatuses()
        let descriptions = store.descriptions(for: key.path)
        follower = FollowerTask()
        follower.tasks = [
            Task { [weak self] in
                for await value in values {
                    guard let self else { return }
                    self.value = value
                }
            },
            Task { [weak self] in
                for await status in statuses {
                    guard let self else { return }
                    if self.status != status { self.status = status }
                }
            },
            Task { [weak self] in
                for await description in descriptions {
                    guard let self else { return }
                    if self.isWritable != description.isWritable { self.isWritable = description.isWritable }
                }
            },
        ]
    }

    /// Writes a new value to the store; ``value`` changes when the store reports it.
    ///
    /// - Throws: what ``SettingsStore/set(_:to:)`` throws.
    public func set(_ newValue: Value) async throws(SettingsError) {
        try await store.set(key, to: newValue)
    }
}

/// Holds the tasks that follow a key, and cancels them when the observed setting is released.
final class FollowerTask: @unchecked Sendable {
    // @unchecked Sendable: `tasks` is written once, on the main actor in the owner's initializer, before the
    // object is shared, and read only in `deinit`, when no other reference exists.
    var tasks: [Task<Void, Never>] = []

    deinit {
        for task in tasks { task.cancel() }
    }
}
