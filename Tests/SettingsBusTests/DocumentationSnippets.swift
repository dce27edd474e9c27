// SPDX-License-Identifier: Apache-2.0

// The code of the SettingsBus documentation (Sources/SettingsBus/Documentation.docc) and of the README's
// client sample, compiled here: each ```swift block of an article appears in this file word for word, and
// each line of the README's in order (DocumentationTests and SettingsCtlTests' DocumentationBlockTests check
// that), so a sample that stops compiling fails the build. The articles' Package.swift fragments are checked
// by SettingsCtlTests' ManifestTests instead.

import SettingsBus
import SettingsBusTesting
import Testing

// MARK: GettingStarted.md

enum ColorScheme: String, SettingValue { case light, dark, system }

extension SettingKey {
    static var colorScheme: SettingKey<ColorScheme> { .init("/org/example/app/color-scheme", default: .system) }
    static var fontSize: SettingKey<Int> { .init("/org/example/app/font-size", default: 11) }
}

func start(settings: some SettingsStore) async throws {
    try await settings.register(.colorScheme, .fontSize)
    try await settings.set(.colorScheme, to: .dark)
    let size = try await settings.get(.fontSize)
    try await settings.update(.fontSize) { $0 = max($0, size) + 1 }
}

// MARK: KeysAndValues.md

struct EditorFont: Codable, SettingValue {
    var family: String
    var size: Double
    static let settingRepresentation = SettingRepresentations.Codable<EditorFont>()
}

extension SettingKey {
    static var editorFont: SettingKey<EditorFont> {
        .init("/org/example/app/font", default: EditorFont(family: "Sans", size: 11))
    }
    static var tabWidth: SettingKey<Int> {
        SettingKey<Int>("/org/example/app/tab-width", default: 4, summary: "Spaces per tab").range(1...16)
    }
}

func applyDefaults(settings: some SettingsStore) async throws {
    try await settings.transaction { transaction in
        try transaction.set(.tabWidth, to: 8)
        try transaction.set(.editorFont, to: EditorFont(family: "Mono", size: 12))
    }
}

// MARK: WatchingChanges.md

func follow(settings: some SettingsStore, apply: (ColorScheme) -> Void) async {
    for await scheme in settings.values(for: .colorScheme) {
        apply(scheme)
    }
}

@MainActor func makeFontSize(settings: any SettingsStore) -> ObservedSetting<Int> {
    ObservedSetting(.fontSize, in: settings)
}

@MainActor func makeEditorWindow(settings: any SettingsStore) async throws -> ObservedSetting<ColorScheme> {
    try await settings.preload(.colorScheme, .fontSize)
    return ObservedSetting(.colorScheme, in: settings)
}

@MainActor func describe(_ setting: ObservedSetting<ColorScheme>) -> String {
    switch setting.status {
    case .connected: setting.isWritable ? "\(setting.value)" : "\(setting.value) (locked)"
    case .connecting: "\(setting.value) (connecting)"
    case .unavailable(let error): "\(setting.value) (default: \(error.message))"
    }
}

// MARK: EvolvingSettings.md

extension SettingKey {
    static var fontPoints: SettingKey<Int32> { .init("/org/example/app/font-points", default: 11) }
    static var textSize: SettingKey<Double> { .init("/org/example/app/text-size", default: 11) }
}

func upgradeToVersion2(settings: some SettingsStore) async throws {
    try await settings.migrate(from: .fontPoints, to: .textSize) { points in Double(points) }
    try await settings.unregister(.fontPoints)
}

func registerBesideANewerVersion(settings: some SettingsStore) async throws {
    do {
        try await settings.register(.tabWidth)
    } catch where error.code == .schemaConflict {
        // A newer version registered a wider schema, which accepts every value this one writes.
    }
}

// MARK: ImplementingAStore.md

@Test(arguments: SettingsStoreConformance.checks)
func myStoreConforms(_ check: SettingsStoreConformance.Check) async throws {
    try await check.run(on: InMemorySettingsStore())
}

// MARK: TestingAppCode.md

@Test func aNewDocumentUsesTheFontSize() async throws {
    let settings = InMemorySettingsStore()
    try await settings.set(.fontSize, to: 14)
    #expect(try await settings.get(.fontSize) == 14)
}

// MARK: README.md (each line in order; the statements sit in a function)

enum Theme: String, SettingValue { case light, dark, highContrast = "high-contrast" }   // stored as 's'

extension SettingKey where Value == Theme {
    static var theme: Self { .init("/org/example/app/theme", default: .light) }
}

/// The README's sample on the session bus (compiled, not run: the tests never use the session bus).
func followTheThemeOnTheSessionBus() async throws {
    let settings = BusSettingsStore()                 // the session bus; the first call starts the broker
    try await settings.register(.theme)               // the broker now refuses other types, from anyone
    try await settings.set(.theme, to: .dark)
    for await theme in settings.values(for: .theme) { // the current value, then every change, from any process
        print("theme: \(theme)")
    }
}
