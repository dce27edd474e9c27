// SPDX-License-Identifier: Apache-2.0
//
// Version 1 of a notes app's settings, under /org/example/notes/. With the worked example's version 2
// (notes-v2) it shows how settings evolve between versions that run side by side.
//
//   notes-v1 write            registers its keys and writes its values
//   notes-v1 read             registers its keys and prints each value
//   notes-v1 watch [--count N] prints the font size, then every change of it (N values, then exits)
//
// An older version registers only what is compatible with what is registered: when a newer version has
// widened a key (more choices, a wider range), registering the narrower schema again is a SchemaConflict, and
// version 1 keeps the newer schema, which accepts every value version 1 writes.

import Foundation
import SettingsBus

extension SettingKey where Value == String {
    static var sort: Self { .init("/org/example/notes/sort", default: "date").choices(["title", "date"]) }
}

extension SettingKey where Value == Int32 {
    static var fontSize: Self { .init("/org/example/notes/font-size", default: 12).range(8...24) }
}

extension SettingKey where Value == Bool {
    /// Renamed to `preview` in version 2.
    static var showPreview: Self { .init("/org/example/notes/show-preview", default: true) }
}

func say(_ line: String) {
    // Written at once, not buffered, so a reader of a pipe sees each line as it is printed.
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Registers a key, keeping a newer, compatible schema that a later version registered.
func registerCompatibly<Value>(_ key: SettingKey<Value>, in settings: BusSettingsStore) async throws(SettingsError) {
    do {
        try await settings.register(key)
    } catch {
        guard error.code == .schemaConflict else { throw error }
        say("kept the newer schema of \(key.path)")
    }
}

func registerAll(in settings: BusSettingsStore) async throws(SettingsError) {
    try await registerCompatibly(.sort, in: settings)
    try await registerCompatibly(.fontSize, in: settings)
    try await registerCompatibly(.showPreview, in: settings)
}

func watch(count: Int, in settings: BusSettingsStore) async {
    var remaining = count
    for await size in settings.values(for: .fontSize) {
        say("font-size: \(size)")
        remaining -= 1
        if remaining == 0 { break }
    }
}

func run(_ arguments: [String], in settings: BusSettingsStore) async throws(SettingsError) -> Bool {
    switch arguments.first {
    case "write":
        try await registerAll(in: settings)
        try await settings.set(.sort, to: "title")
        try await settings.set(.fontSize, to: 14)
        try await settings.set(.showPreview, to: false)
        say("v1 wrote sort=title font-size=14 show-preview=false")
    case "read":
        try await registerAll(in: settings)
        say("sort: \(try await settings.get(.sort))")
        say("font-size: \(try await settings.get(.fontSize))")
        say("show-preview: \(try await settings.get(.showPreview))")
    case "watch":
        var count = Int.max
        if let index = arguments.firstIndex(of: "--count"), index + 1 < arguments.count {
            count = Int(arguments[index + 1]) ?? Int.max
        }
        await watch(count: count, in: settings)
    default:
        return false
    }
    return true
}

let settings = BusSettingsStore()
var status: Int32 = 0
do {
    if try await !run(Array(CommandLine.arguments.dropFirst()), in: settings) {
        FileHandle.standardError.write(Data("usage: notes-v1 write | read | watch [--count N]\n".utf8))
        status = 2
    }
} catch {
    FileHandle.standardError.write(Data("notes-v1: \(error.message)\n".utf8))
    status = 1
}
await settings.close()
exit(status)
