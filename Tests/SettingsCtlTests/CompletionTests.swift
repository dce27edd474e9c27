// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The shell completion `settingsctl --generate-completion-script` writes, run by a real bash as it runs on
/// a Tab: key paths come from the broker.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct CompletionTests {
    /// What bash offers for the command line `line` (a Tab at its end), with the completion script loaded.
    static func complete(_ line: String, on bus: TestBus) async throws -> [String] {
        let ctl = try Ctl.path()
        let script = try await TestProcess.run(ctl, ["--generate-completion-script", "bash"])
        #expect(script.status == 0, "\(script.stderr)")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("settingsctl-completion-\(UUID()).bash")
        try script.stdout.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        var words = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        words[0] = ctl
        let full = words.joined(separator: " ")
        let program = """
            source \(file.path)
            COMP_WORDS=(\(words.map { "'\($0)'" }.joined(separator: " ")))
            COMP_CWORD=\(words.count - 1)
            COMP_LINE='\(full)'
            COMP_POINT=\(full.utf8.count)
            COMPREPLY=()
            _settingsctl '\(ctl)' '\(words.last!)' '\(words[words.count - 2])'
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let result = try await TestProcess.run("/bin/bash", ["-c", program], environment: bus.environment)
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test func aTabCompletesKeyPathsFromTheBroker() async throws {
        try await withTestBus { bus in
            let broker = try await TestBroker.start(on: bus)
            for key in ["/test/completion/theme", "/test/completion/tab-width", "/test/completion/fonts/size", "/test/other/x"] {
                _ = try await Ctl.output(bus, ["set", key, "1"])
            }
            #expect(try await Self.complete("settingsctl get /test/completion/t", on: bus)
                == ["/test/completion/tab-width", "/test/completion/theme"])
            #expect(try await Self.complete("settingsctl get /test/completion/", on: bus)
                == ["/test/completion/fonts/", "/test/completion/tab-width", "/test/completion/theme"])
            #expect(try await Self.complete("settingsctl reset /te", on: bus) == ["/test/"])
            // A verb that takes a directory is offered directories only.
            #expect(try await Self.complete("settingsctl dump /test/completion/", on: bus) == ["/test/completion/fonts/"])
            #expect(try await Self.complete("settingsctl get /nothing/here/", on: bus) == [])
            #expect(await broker.stop() == 0)
        }
    }

    @Test func withNoBrokerATabOffersNothingAndReturns() async throws {
        try await withTestBus { bus in
            let offered = try await Self.complete("settingsctl get /test/", on: bus)
            #expect(offered == [])
        }
    }
}
