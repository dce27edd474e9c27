// SPDX-License-Identifier: Apache-2.0
//
// Follows the example theme live: prints the current theme, then every change, from any process.
// `follow-theme --count 3` exits after printing three themes.

import Foundation
import SettingsBus
import ThemeSettings

var remaining = Int.max
if let index = CommandLine.arguments.firstIndex(of: "--count"), index + 1 < CommandLine.arguments.count {
    remaining = Int(CommandLine.arguments[index + 1]) ?? Int.max
}

let settings = BusSettingsStore()
for await theme in settings.values(for: .theme) {
    // Written at once, not buffered, so a reader of a pipe sees each theme as it arrives.
    FileHandle.standardOutput.write(Data("theme: \(theme.rawValue)\n".utf8))
    remaining -= 1
    if remaining == 0 { break }
}
await settings.close()
