// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
@testable import SettingsBroker
import SettingsBusTesting
import SettingsModel

/// What the in-process store tests do to a ``DurableStore`` and its file.
enum StoreCalls {
    /// Stores one value in its own commit; returns the commit's serial.
    static func set(_ store: DurableStore, _ key: String, _ value: DBusValue) async throws -> UInt64 {
        try await WritePath(store: store).apply(Changeset(sets: [(try SettingPath(key), value)], origin: "test"))
    }

    /// Finishes the commits in flight and closes the file, as the broker does when it stops.
    static func shutDown(_ store: DurableStore) async {
        await store.close()
        store.storePersistence.close()
    }

    /// Runs SQL on a store file with python3's sqlite3 (another process, as another program would) and
    /// returns what `expression` prints.
    static func sqlite(_ file: String, _ statements: String, print expression: String = "''") async throws -> String {
        let script = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            c.executescript(sys.argv[2])
            c.commit()
            print(\(expression))
            c.close()
            """
        let result = try await TestProcess.run(PeerScripts.python, ["-c", script, file, statements])
        guard result.status == 0 else { throw TestFailure("python3 sqlite3 failed: \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
