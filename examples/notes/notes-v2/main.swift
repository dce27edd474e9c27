// SPDX-License-Identifier: Apache-2.0
//
// Version 2 of the notes app's settings (see notes-v1): a choice added to `sort`, the range of `font-size`
// widened, a new key `spell-check`, and `show-preview` renamed to `preview`, its value moved once with
// `migrate(from:to:)`. Every change is compatible, so a plain `register` accepts it.
//
//   notes-v2                  registers, migrates, prints what it reads, then writes values only it allows

import Foundation
import DBus
import SettingsBus

extension SettingKey where Value == String {
    static var sort: Self {
        .init("/org/example/notes/sort", default: "date").choices(["title", "date", "modified"])
    }
}

extension SettingKey where Value == Int32 {
    static var fontSize: Self { .init("/org/example/notes/font-size", default: 12).range(6...48) }
}

extension SettingKey where Value == Bool {
    static var preview: Self { .init("/org/example/notes/preview", default: true) }
    static var spellCheck: Self { .init("/org/example/notes/spell-check", default: false) }
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func run(in settings: BusSettingsStore) async throws(SettingsError) {
    try await settings.register(.sort, .fontSize, .preview, .spellCheck)
    let moved = try await settings.migrate(from: try SettingPath("/org/example/notes/show-preview"), to: .preview) {
        old in
        if case .boolean(let shown) = old { shown } else { nil }
    }
    say("migrated show-preview: \(moved)")
    say("sort: \(try await settings.get(.sort))")
    say("font-size: \(try await settings.get(.fontSize))")
    say("preview: \(try await settings.get(.preview))")
    say("spell-check: \(try await settings.get(.spellCheck))")
    try await settings.set(.fontSize, to: 32)
    try await settings.set(.sort, to: "modified")
    say("v2 wrote font-size=32 sort=modified")
}

let settings = BusSettingsStore()
var status: Int32 = 0
do {
    try await run(in: settings)
} catch {
    FileHandle.standardError.write(Data("notes-v2: \(error.message)\n".utf8))
    status = 1
}
await settings.close()
exit(status)
