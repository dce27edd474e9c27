// SPDX-License-Identifier: Apache-2.0

public import SettingsBus
import SettingsModel

/// The behaviour every ``SettingsBus/SettingsStore`` shares, as checks a test runs against a store.
///
/// Run every check against each store, so the bus-backed store and the in-memory one (and any store of
/// your own) are interchangeable in app code:
///
/// ```swift
/// @Test(arguments: SettingsStoreConformance.checks)
/// func inMemoryStoreConforms(_ check: SettingsStoreConformance.Check) async throws {
///     try await check.run(on: InMemorySettingsStore())
/// }
/// ```
///
/// A failed check throws ``Failure`` saying what was expected and what happened.
public enum SettingsStoreConformance {
    /// One named check.
    public struct Check: Sendable, CustomStringConvertible {
        /// The check's name, such as `transactionIsAtomic`.
        public let name: String
        let body: @Sendable (any SettingsStore, SettingDirectory) async throws -> Void

        /// Runs the check on a store, under a directory of its own (`/conformance/<name>/`).
        ///
        /// - Throws: ``Failure`` when the store misbehaves; any error the store throws unexpectedly.
        public func run(on store: any SettingsStore) async throws {
            try await body(store, try SettingDirectory("/conformance/\(name)/"))
        }

        /// The name.
        public var description: String { name }
    }

    /// A check that failed.
    public struct Failure: Error, CustomStringConvertible {
        /// What was expected and what happened.
        public let description: String
        /// Where.
        public let line: Int
    }

    static func expect(_ condition: Bool, _ message: @autoclosure () -> String, line: Int = #line) throws {
        guard condition else { throw Failure(description: message(), line: line) }
    }

    static func expectEqual<T: Equatable>(_ actual: T, _ expected: T, _ what: String, line: Int = #line) throws {
        guard actual == expected else {
            throw Failure(description: "\(what): expected \(expected), got \(actual)", line: line)
        }
    }

    /// Runs `body` and expects it to throw a ``SettingsModel/SettingsError`` with `code`.
    static func expectError(
        _ code: SettingsError.Code, line: Int = #line, _ body: () async throws -> Void
    ) async throws {
        do {
            try await body()
        } catch let error as SettingsError {
            guard error.code == code else {
                throw Failure(description: "expected \(code), got \(error.code): \(error.message)", line: line)
            }
            guard !error.message.isEmpty else { throw Failure(description: "\(code) has an empty message", line: line) }
            return
        }
        throw Failure(description: "expected \(code), but nothing was thrown", line: line)
    }
}
