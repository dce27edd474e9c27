// SPDX-License-Identifier: Apache-2.0

internal import Glibc

/// The header strings a connection has seen lately (paths, interfaces, members, senders), so that decoding a
/// message reuses a `String` instead of making one for each field of each message.
///
/// A connection's messages repeat a few names over and over. Reusing a string costs a length check and a
/// byte comparison instead of an allocation, a copy and a UTF-8 check, and a reused string compares equal to
/// the one it came from without reading its bytes (the strings of match rules are remembered for that).
///
/// Used on one connection's thread only.
final class HeaderStrings {
    private struct Entry {
        var string: String
        /// The string's bytes, NUL-terminated, to compare with libdbus's.
        var bytes: [CChar]
        var length: Int
    }

    /// At most this many strings are kept; a new one replaces the oldest.
    private static let capacity = 16
    private var entries: [Entry] = []
    private var next = 0

    init() {
        entries.reserveCapacity(HeaderStrings.capacity)
    }

    /// The string for a NUL-terminated header field that libdbus validated (so it is valid UTF-8).
    func string(_ text: UnsafePointer<CChar>) -> String {
        let length = strlen(text)
        for index in entries.indices where entries[index].length == length {
            let same = entries[index].bytes.withUnsafeBufferPointer { memcmp($0.baseAddress!, text, length) == 0 }
            if same { return entries[index].string }
        }
        let string = String(cString: text)
        add(string, Array(UnsafeBufferPointer(start: text, count: length + 1)))
        return string
    }

    /// Keeps a string to be reused by later messages.
    func remember(_ string: String) {
        let bytes = Array(string.utf8CString)
        guard !entries.contains(where: { $0.bytes == bytes }) else { return }
        add(string, bytes)
    }

    private func add(_ string: String, _ bytes: [CChar]) {
        let entry = Entry(string: string, bytes: bytes, length: bytes.count - 1)
        if entries.count < HeaderStrings.capacity {
            entries.append(entry)
        } else {
            entries[next] = entry
            next = (next + 1) % HeaderStrings.capacity
        }
    }
}
