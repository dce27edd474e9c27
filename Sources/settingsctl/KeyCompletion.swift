// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import SettingsBus
import SettingsModel

/// Completes key paths and directories in the shell from what the broker holds, as dconf's completion does:
/// the word typed so far names a directory up to its last `/`, whose children (`List`) that start with the
/// rest are offered. The bus is the one the command line names with `--bus`, else the session bus.
///
/// The shell waits for the answer, so it gives up after ``timeLimit`` and offers nothing; with no broker (and
/// none that D-Bus activation can start) it offers nothing.
enum KeyCompletion {
    /// Keys, and the directories that lead to them.
    static let keys = CompletionKind.custom { words, _, prefix in
        await complete(prefix, words: words, directoriesOnly: false)
    }

    /// Directories only.
    static let directories = CompletionKind.custom { words, _, prefix in
        await complete(prefix, words: words, directoriesOnly: true)
    }

    /// How long a completion waits for the broker.
    static let timeLimit: Duration = .seconds(2)

    /// The completions of `prefix`: full paths, directories ending in `/`.
    static func complete(_ prefix: String, words: [String], directoriesOnly: Bool) async -> [String] {
        let typed = prefix.isEmpty ? "/" : prefix
        guard typed.hasPrefix("/"), let slash = typed.lastIndex(of: "/") else { return ["/"] }
        let parent = String(typed[...slash])
        let start = String(typed[typed.index(after: slash)...])
        guard let directory = try? SettingDirectory(parent) else { return [] }
        let store = BusSettingsStore(bus: BusOptions.choice(busOption(in: words) ?? "session"))
        let names = await withTaskGroup(of: [String]?.self) { group in
            group.addTask { try? await store.list(directory) }
            group.addTask {
                try? await Task.sleep(for: timeLimit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? []
        }
        await store.close()
        // Only names of the key grammar are offered: a shell shows the candidates as they are.
        return names.filter { $0.hasPrefix(start) && (!directoriesOnly || $0.hasSuffix("/")) }.map { parent + $0 }
            .filter { (try? SettingLocation($0)) != nil }
    }

    /// The value of the last `--bus X` or `--bus=X` among the words of the command line.
    static func busOption(in words: [String]) -> String? {
        var found: String?
        for (index, word) in words.enumerated() {
            if word == "--bus", index + 1 < words.count {
                found = words[index + 1]
            } else if word.hasPrefix("--bus=") {
                found = String(word.dropFirst("--bus=".count))
            }
        }
        return found
    }
}
