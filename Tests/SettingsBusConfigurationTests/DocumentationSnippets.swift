// SPDX-License-Identifier: Apache-2.0

// The samples of the module's DocC catalog (Sources/SettingsBusConfiguration/Documentation.docc) and of the
// library's documentation comments, word for word (DocumentationTests checks that each is here), so that a
// sample that stops compiling fails the build.

import Configuration
import SettingsBus
import SettingsBusConfiguration

/// The editor's configuration: environment variables first (`EDITOR_FONT_SIZE=16`), then the settings bus.
func editorConfiguration(settings: some SettingsStore) async throws -> ConfigReader {
    let provider = try await SettingsBusProvider(store: settings, directory: SettingDirectory("/org/example/"))
    return ConfigReader(providers: [EnvironmentVariablesProvider(), provider])
}

/// The rest of the sample, on the session bus (compiled, not run: the tests never use the session bus).
func followTheFontSizeOnTheSessionBus() async throws {
    let config = try await editorConfiguration(settings: BusSettingsStore())
    let fontSize = config.int(forKey: "editor.font-size", default: 12)      // /org/example/editor/font-size
    try await config.watchInt(forKey: "editor.font-size", default: 12) { sizes in
        for await size in sizes { print("font size: \(size)") }          // each change, by any process
    }
    _ = fontSize
}

/// The sample of `SettingsBusProvider.settingKey(for:)`.
func settingKeyOfTheFontSize(provider: SettingsBusProvider) throws -> SettingPath {
    let key = try provider.settingKey(for: AbsoluteConfigKey(["editor", "font-size"]))
    // key.rawValue == "/org/example/editor/font-size"
    return key
}
