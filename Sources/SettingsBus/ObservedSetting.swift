// SPDX-License-Identifier: Apache-2.0

public import Observation
public import SettingsModel

/// An `@Observable` object whose ``value`` follows a key live, for UI code.
///
/// It starts with the local copy of the value (or the key's default) and follows every change, whichever
/// process makes it; SwiftUI-style observation (`withObservationTracking`) sees each one.
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
    /// The key's current value.
    public private(set) var value: Value
    /// The key followed.
    @ObservationIgnored public let key: SettingKey<Value>
    @ObservationIgnored private let store: any SettingsStore
    @ObservationIgnored private let follower: FollowerTask

    /// Follows a key of a store.
    public init(_ key: SettingKey<Value>, in store: any SettingsStore) {
        self.key = key
        self.store = store
        self.value = store.cached(key) ?? key.defaultValue
        let values = store.values(for: key)
        follower = FollowerTask()
        follower.task = Task { [weak self] in
            for await value in values {
                guard let self else { return }
                self.value = value
            }
        }
    }

    /// Writes a new value to the store; ``value`` changes when the store reports it.
    ///
    /// - Throws: what ``SettingsStore/set(_:to:)`` throws.
    public func set(_ newValue: Value) async throws(SettingsError) {
        try await store.set(key, to: newValue)
    }
}

/// Holds the task that follows a key, and cancels it when the observed setting is released.
final class FollowerTask: @unchecked Sendable {
    // @unchecked Sendable: `task` is written once, on the main actor in the owner's initializer, before the
    // object is shared, and read only in `deinit`, when no other reference exists.
    var task: Task<Void, Never>?

    deinit {
        task?.cancel()
    }
}
