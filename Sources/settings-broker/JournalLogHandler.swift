// SPDX-License-Identifier: Apache-2.0

import Glibc
import Logging

/// A log handler that writes one line per message to standard error in the form journald reads: a syslog
/// priority prefix (`<3>` for errors, sd-daemon(3)) followed by the message and its metadata as `key=value`.
struct JournalLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let priority: Int
        switch event.level {
        case .trace, .debug: priority = 7
        case .info: priority = 6
        case .notice: priority = 5
        case .warning: priority = 4
        case .error: priority = 3
        case .critical: priority = 2
        }
        var line = "<\(priority)>\(event.message)"
        let all = metadata.merging(event.metadata ?? [:]) { _, new in new }
        for (key, value) in all.sorted(by: { $0.key < $1.key }) {
            let text = "\(value)"
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
