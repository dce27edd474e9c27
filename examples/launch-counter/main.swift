// SPDX-License-Identifier: Apache-2.0
//
// Counts launches: each run adds one to a shared counter, `--times N` adds N. Run several at once and the
// count is exact: `update` is a compare-and-set that retries when another process wrote in between.

import Foundation
import SettingsBus
import SettingsModel

extension SettingKey where Value == Int {
    static var launchCount: Self {
        SettingKey("/io/github/settingsbus/examples/launch-count", default: 0, summary: "How often the example was launched")
    }
}

var times = 1
if let index = CommandLine.arguments.firstIndex(of: "--times"), index + 1 < CommandLine.arguments.count {
    times = Int(CommandLine.arguments[index + 1]) ?? 1
}

let settings = BusSettingsStore()
do {
    try await settings.register(.launchCount)
    var count = 0
    for _ in 0..<times {
        count = try await settings.update(.launchCount) { $0 += 1 }
    }
    print("launch-counter: added \(times); the count was \(count) after this process's last update")
} catch {
    FileHandle.standardError.write(Data("launch-counter: \(error.message)\n".utf8))
    exit(1)
}
await settings.close()
