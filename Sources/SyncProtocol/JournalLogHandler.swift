// SPDX-License-Identifier: Apache-2.0

import Glibc
public import Logging

/// A log handler that writes one line per message to standard error, with the message's metadata as
/// `key=value` after it.
///
/// When standard error is the journal's stream, each line starts with a syslog priority prefix (`<3>` for
/// errors, sd-daemon(3)), which journald reads as the message's priority; anywhere else (a terminal, a file,
/// a pipe) the line reads `settings-broker: warning: …` instead (`settings-broker: …` for info and notice).
/// systemd says which stream is the journal's in `JOURNAL_STREAM` (`device:inode`, systemd.exec(5)): a
/// variable inherited by a process whose standard error went elsewhere names another file, and is ignored.
public struct JournalLogHandler: LogHandler {
    let label: String
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    /// Whether lines carry the journal's priority prefix.
    let journal: Bool

    /// Makes a handler; `label` starts each line that does not go to the journal.
    public init(label: String, level: Logger.Level, journal: Bool) {
        self.label = label
        self.logLevel = level
        self.journal = journal
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Whether standard error is the journal's stream: `JOURNAL_STREAM` holds the `device:inode` of the
    /// file that `fstat(2)` gives for it.
    public static func standardErrorIsJournal() -> Bool {
        guard let value = getenv("JOURNAL_STREAM") else { return false }
        let parts = String(cString: value).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }

    public func log(event: LogEvent) {
        var line: String
        if journal {
            let priority: Int
            switch event.level {
            case .trace, .debug: priority = 7
            case .info: priority = 6
            case .notice: priority = 5
            case .warning: priority = 4
            case .error: priority = 3
            case .critical: priority = 2
            }
            line = "<\(priority)>"
        } else {
            switch event.level {
            case .info, .notice: line = "\(label): "
            default: line = "\(label): \(event.level.rawValue): "
            }
        }
        // One line per event: a line break in a message would start a line without its prefix.
        line += "\(event.message)".replacing("\n", with: " ")
        let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
        for (key, value) in all.sorted(by: { $0.key < $1.key }) {
            let text = "\(value)".replacing("\n", with: " ")
            let quoted = text.contains(" ") || text.isEmpty ? "\"\(text.replacing("\"", with: "\\\""))\"" : text
            line += " \(key)=\(quoted)"
        }
        line += "\n"
        // One write per line, so lines of different threads never interleave.
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
