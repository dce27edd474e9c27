// SPDX-License-Identifier: Apache-2.0
//
// Switches the example theme: `switch-theme dark`. Every running `follow-theme` prints the new theme.

import Foundation
import SettingsBus
import ThemeSettings

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count == 1, let theme = Theme(rawValue: arguments.first!) else {
    let names = Theme.allCases.map(\.rawValue).joined(separator: "|")
    FileHandle.standardError.write(Data("usage: switch-theme \(names)\n".utf8))
    exit(2)
}

let settings = BusSettingsStore()
do {
    try await settings.register(.theme)
    let serial = try await settings.set(.theme, to: theme)
    print("theme set to \(theme.rawValue) (serial \(serial))")
} catch {
    FileHandle.standardError.write(Data("switch-theme: \(error.message)\n".utf8))
    exit(1)
}
await settings.close()
