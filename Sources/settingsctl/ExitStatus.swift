// SPDX-License-Identifier: Apache-2.0

import SettingsModel

/// The exit statuses of `settingsctl`, which scripts can rely on (also listed in `settingsctl --help`).
///
/// | status | meaning |
/// | --- | --- |
/// | 0 | success |
/// | 1 | any other failure (`StoreFailure`, a file that cannot be read) |
/// | 2 | usage error (ArgumentParser's, and a directory given to `reset` without `-r`) |
/// | 3 | `UnknownKey` |
/// | 4 | `InvalidKey`, `InvalidValue`, `TypeMismatch`, `OutOfRange`, `TooLarge`, malformed input files |
/// | 5 | `BrokerUnavailable`, `TimedOut`, `Disconnected` |
/// | 6 | `SchemaConflict`, `Conflict` |
/// | 7 | `NotWritable` |
/// | 8 | `AccessDenied` (a secret key's value, which the broker gives only to some users) |
enum ExitStatus: Int32, Sendable {
    case success = 0
    case failure = 1
    case usage = 2
    case unknownKey = 3
    case invalid = 4
    case unavailable = 5
    case conflict = 6
    case notWritable = 7
    case accessDenied = 8

    /// The status for a settings error code.
    init(_ code: SettingsError.Code) {
        switch code {
        case .unknownKey: self = .unknownKey
        case .invalidKey, .invalidValue, .typeMismatch, .outOfRange, .tooLarge: self = .invalid
        case .brokerUnavailable, .timedOut, .disconnected: self = .unavailable
        case .conflict, .schemaConflict: self = .conflict
        case .notWritable: self = .notWritable
        case .accessDenied: self = .accessDenied
        default: self = .failure
        }
    }
}

/// A failure of `settingsctl` itself (a malformed file, an unreadable input), with its exit status.
struct CtlError: Error, Sendable {
    /// The exit status.
    var status: ExitStatus
    /// What is wrong, for the person who ran the command.
    var message: String

    /// Makes an error.
    init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }
}
