// SPDX-License-Identifier: Apache-2.0

// The code of the SettingsBus documentation (Sources/SettingsBus/Documentation.docc), compiled here: each
// ```swift block of an article appears in this file word for word (DocumentationTests checks that), so a
// sample that stops compiling fails the build.

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
    static let settingRepresentation = CodableRepresentation<EditorFont>()
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
