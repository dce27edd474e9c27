// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import FuzzChecks
import Testing
import TestMachine

/// Every seed in `Fuzz/corpus` and every input that once broke a check, kept in `Fuzz/regressions`, runs
/// through its check on each test run, in a normal build.
@Suite(.sharingTheMachine) struct CorpusReplayTests {
    static let fuzzFolder = URL(filePath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz")

    static func inputs(of check: FuzzCheck, in folder: String) -> [String] {
        let path = fuzzFolder.appendingPathComponent(folder).appendingPathComponent(check.rawValue).path
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        return FuzzInputs.files(at: path)
    }

    @Test(arguments: FuzzCheck.allCases)
    func seedCorpusPassesItsCheck(_ check: FuzzCheck) throws {
        let files = Self.inputs(of: check, in: "corpus")
        #expect(files.count >= 10, "the seed corpus of \(check.rawValue) has \(files.count) files")
        var accepted = 0
        for file in files {
            #expect(throws: Never.self, "\(file)") {
                if try check.run(FuzzInputs.read(file)) == .accepted { accepted += 1 }
            }
        }
        // Most seeds are valid input, so that fuzzing starts from the paths that accept and check a value.
        #expect(accepted * 2 > files.count, "\(accepted) of \(files.count) seeds of \(check.rawValue) accepted")
    }

    @Test(arguments: FuzzCheck.allCases)
    func everyRegressionPassesItsCheck(_ check: FuzzCheck) throws {
        for file in Self.inputs(of: check, in: "regressions") {
            #expect(throws: Never.self, "\(file)") { try check.run(FuzzInputs.read(file)) }
        }
    }
}
