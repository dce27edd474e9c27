// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The worked example of `examples/notes/`: version 1 and version 2 of an app's settings, side by side on one
/// broker: a choice added, a range widened, a key added and a renamed key's value moved, while version 1 still
/// watches, reads and writes.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)))
struct NotesExampleTests {
    @Test func version2EvolvesTheSettingsWhileVersion1KeepsWorking() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let v1 = try BuiltProduct.path("notes-v1"), v2 = try BuiltProduct.path("notes-v2")

            // Given: version 1 registered and wrote its values, and watches the font size.
            let wrote = try await TestProcess.run(v1, ["write"], environment: bus.environment)
            #expect(wrote.status == 0, "\(wrote.stderr)")
            #expect(wrote.stdout == "v1 wrote sort=title font-size=14 show-preview=false\n")
            let watcher = try RunningProcess.start(v1, ["watch"], environment: bus.environment)
            #expect(try await watcher.nextLine() == "font-size: 14")

            // When: version 2 registers its keys, moves the renamed key's value and writes.
            let upgraded = try await TestProcess.run(v2, [], environment: bus.environment)
            #expect(upgraded.status == 0, "\(upgraded.stderr)")

            // Then: version 2 read version 1's values, the renamed key's value moved, the new key has its
            // default, and version 1's watcher sees version 2's write (outside version 1's range).
            #expect(
                upgraded.stdout == """
                    migrated show-preview: true
                    sort: title
                    font-size: 14
                    preview: false
                    spell-check: false
                    v2 wrote font-size=32 sort=modified

                    """)
            #expect(try await watcher.nextLine() == "font-size: 32")
            await watcher.terminate()

            // And: version 1 still runs: it keeps version 2's wider schemas, reads version 2's values, and writes.
            let read = try await TestProcess.run(v1, ["read"], environment: bus.environment)
            #expect(read.status == 0, "\(read.stderr)")
            #expect(
                read.stdout == """
                    kept the newer schema of /org/example/notes/sort
                    kept the newer schema of /org/example/notes/font-size
                    sort: modified
                    font-size: 32
                    show-preview: true

                    """)
            #expect(try await TestProcess.run(v1, ["write"], environment: bus.environment).status == 0)
            // Running version 2 again moves nothing more.
            let again = try await TestProcess.run(v2, [], environment: bus.environment)
            #expect(again.stdout.hasPrefix("migrated show-preview: false\n"), "\(again.stdout)")
            #expect(await broker.stop() == 0)
        }
    }
}
