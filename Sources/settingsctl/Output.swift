// SPDX-License-Identifier: Apache-2.0

import Foundation

/// Writes to standard output and standard error without buffering, so that each change `watch` prints
/// reaches a pipe at once.
enum Output {
    /// Writes text to standard output.
    static func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    /// Writes lines to standard output, each followed by a newline, in one write.
    static func lines(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        write(lines.joined(separator: "\n") + "\n")
    }

    /// Writes text to standard error.
    static func writeError(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// Prints `Error: <message>` to standard error and exits with `status`.
    static func fail(_ status: ExitStatus, _ message: String) -> Never {
        writeError("Error: \(message)\n")
        exit(status.rawValue)
    }
}
