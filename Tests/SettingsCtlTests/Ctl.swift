// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing

/// Runs the real `settingsctl` binary, built next to the test bundle, against a private bus.
enum Ctl {
    /// The repository's root folder.
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The `settingsctl` executable (`swift build --build-tests` builds it).
    static func path() throws -> String {
        try BuiltProduct.path("settingsctl")
    }

    /// Runs `settingsctl` with `arguments` on `bus`, the bus given as the session bus in the environment.
    static func run(
        _ bus: TestBus, _ arguments: [String], input: String? = nil, environment: [String: String] = [:]
    ) async throws -> TestProcess.Result {
        try await TestProcess.run(
            try path(), arguments, environment: bus.environment.merging(environment) { _, new in new }, input: input)
    }

    /// Runs `settingsctl`, expects exit status 0, and returns its standard output.
    static func output(
        _ bus: TestBus, _ arguments: [String], input: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        let result = try await run(bus, arguments, input: input)
        #expect(
            result.status == 0, "settingsctl \(arguments.joined(separator: " ")): \(result.stderr)",
            sourceLocation: sourceLocation)
        return result.stdout
    }

    /// Runs `settingsctl` and expects it to fail with `status`, saying something on standard error that
    /// contains `message`.
    @discardableResult
    static func failure(
        _ bus: TestBus, _ arguments: [String], status: Int32, message: String, input: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> TestProcess.Result {
        let result = try await run(bus, arguments, input: input)
        #expect(
            result.status == status,
            "settingsctl \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)",
            sourceLocation: sourceLocation)
        #expect(result.stderr.contains(message), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, "\(result.stdout)", sourceLocation: sourceLocation)
        return result
    }
}
