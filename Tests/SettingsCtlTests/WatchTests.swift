// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// `settingsctl watch` prints the changes that other processes make, as they happen.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct WatchTests {
    /// Reads the next block the watcher prints: its lines up to the blank line that ends it.
    static func block(_ watcher: RunningProcess) async throws -> [String] {
        var lines: [String] = []
        while let line = try await watcher.nextLine(), !line.isEmpty {
            lines.append(line)
        }
        return lines
    }

    @Test func watchPrintsEachChangeOfADirectoryMadeByOtherProcesses() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            _ = try await Ctl.output(bus, ["set", "/test/watch/editor/theme", "'dark'"])
            let watcher = try RunningProcess.start(
                try Ctl.path(), ["watch", "--initial", "/test/watch/"], environment: bus.environment)

            // Given: the watch is in place once it has printed the current values.
            #expect(try await Self.block(watcher) == ["/test/watch/", "  editor/theme='dark'"])

            // When: another process sets one key. Then: a block names the key and its value.
            _ = try await Ctl.output(bus, ["set", "/test/watch/editor/theme", "'light'"])
            #expect(try await Self.block(watcher) == ["/test/watch/editor/theme", "  theme='light'"])

            // When: gdbus sets a key the watcher has not seen yet.
            let gdbus = try await TestProcess.run(
                "/usr/bin/gdbus",
                [
                    "call", "--session", "--dest", "io.github.settingsbus.Settings1", "--object-path",
                    "/io/github/settingsbus/Settings1", "--method", "io.github.settingsbus.Settings1.Set",
                    "/test/watch/size", "<uint32 12>",
                ],
                environment: bus.environment)
            #expect(gdbus.status == 0, "\(gdbus.stderr)")
            #expect(try await Self.block(watcher) == ["/test/watch/size", "  size=uint32 12"])

            // When: one commit changes two keys. Then: one block, headed by their common directory.
            _ = try await Ctl.output(
                bus, ["load", "/test/watch/"], input: "[editor]\ntheme='dark'\nfont='Mono'\n")
            #expect(
                try await Self.block(watcher) == ["/test/watch/editor/", "  font='Mono'", "  theme='dark'"])

            // When: the keys are reset. Then: they are listed without values.
            _ = try await Ctl.output(bus, ["reset", "-r", "/test/watch/"])
            #expect(
                try await Self.block(watcher)
                    == ["/test/watch/", "  editor/font (no value)", "  editor/theme (no value)", "  size (no value)"])

            #expect(await watcher.terminate() == 143)
            #expect(await broker.stop() == 0)
        }
    }

    @Test func watchWithJSONPrintsOneLinePerChangeOfAKey() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            let watcher = try RunningProcess.start(
                try Ctl.path(), ["watch", "--json", "--initial", "/test/watch/volume"], environment: bus.environment)
            let initial = try await watcher.nextLine()
            #expect(initial?.hasPrefix(#"{"kind":"initial","path":"/test/watch/volume","#) == true, "\(initial ?? "")")
            #expect(initial?.hasSuffix(#""values":{},"removed":["/test/watch/volume"]}"#) == true, "\(initial ?? "")")

            _ = try await Ctl.output(bus, ["set", "/test/watch/volume", "0.5"])
            let line = try #require(try await watcher.nextLine())
            #expect(
                line.hasPrefix(#"{"kind":"change","path":"/test/watch/volume","serial":1,"origin":":1."#), "\(line)")
            #expect(
                line.hasSuffix(
                    #""values":{"/test/watch/volume":{"type":"d","value":0.5,"text":"0.5"}},"removed":[]}"#),
                "\(line)")

            _ = try await Ctl.output(bus, ["reset", "/test/watch/volume"])
            let reset = try #require(try await watcher.nextLine())
            #expect(reset.hasSuffix(#""values":{},"removed":["/test/watch/volume"]}"#), "\(reset)")

            #expect(await watcher.terminate() == 143)
            #expect(await broker.stop() == 0)
        }
    }
}
