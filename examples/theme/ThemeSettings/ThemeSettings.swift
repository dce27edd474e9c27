// SPDX-License-Identifier: Apache-2.0

public import SettingsBus


/// The theme of the example apps: stored as its raw value, a string.
public enum Theme: String, SettingValue, CaseIterable, Sendable {
    case light
    case dark
    case highContrast = "high-contrast"
}

extension SettingKey where Value == Theme {
    /// The theme every example app follows.
    public static var theme: Self {
        SettingKey("/io/github/settingsbus/examples/theme", default: .light, summary: "The theme of the example apps")
            .choices(Theme.allCases)
    }
}
