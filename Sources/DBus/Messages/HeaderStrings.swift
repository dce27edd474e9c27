// SPDX-License-Identifier: Apache-2.0

internal import Glibc

/// Values made from NUL-terminated strings that a connection sees again and again, kept with the strings'
/// bytes so that the next occurrence finds its value with a length check and a byte comparison.
///
/// A connection's messages repeat a few names (paths, interfaces, members, senders) and a few signatures.
/// Reusing a value costs far less than making a `String` (an allocation, a copy and a UTF-8 check) or parsing
/// a signature for each field of each message. Used on one connection's thread only.
final class CStringCache<Value> {
    private struct Entry {
        var value: Value
        /// The string's bytes, NUL-terminated.
        var bytes: [CChar]
    }

    /// At most this many values are kept; a new one replaces the oldest.
    private let capacity: Int
    private var entries: [Entry] = []
    private var next = 0

    init(capacity: Int = 16) {
        self.capacity = capacity
        entries.reserveCapacity(capacity)
    }

    /// The value kept for `text`, or the one `make` makes from it (kept from then on, unless it throws).
    func value<Failure: Error>(
        for text: UnsafePointer<CChar>, orMake make: (UnsafePointer<CChar>) throws(Failure) -> Value
    ) throws(Failure) -> Value {
        let length = strlen(text)
        for index in entries.indices where entries[index].bytes.count == length + 1 {
            let same = entries[index].bytes.withUnsafeBufferPointer { memcmp($0.baseAddress!, text, length) == 0 }
            if same { return entries[index].value }
        }
        let value = try make(text)
        add(value, Array(UnsafeBufferPointer(start: text, count: length + 1)))
        return value
    }

    /// Keeps a value for a string, unless one is kept for it already.
    func remember(_ value: Value, for text: String) {
        let bytes = Array(text.utf8CString)
        guard !entries.contains(where: { $0.bytes == bytes }) else { return }
        add(value, bytes)
    }

    private func add(_ value: Value, _ bytes: [CChar]) {
        let entry = Entry(value: value, bytes: bytes)
        if entries.count < capacity {
            entries.append(entry)
        } else {
            entries[next] = entry
            next = (next + 1) % capacity
        }
    }
}

/// The header strings a connection has seen lately (paths, interfaces, members, senders), so that decoding a
/// message reuses a `String` instead of making one for each field. A reused string also compares equal to the
/// one it came from without reading its bytes: the strings of match rules are remembered for that.
final class HeaderStrings {
    private let cache = CStringCache<String>()

    /// The string for a NUL-terminated header field that libdbus validated (so it is valid UTF-8).
    func string(_ text: UnsafePointer<CChar>) -> String {
        cache.value(for: text) { String(cString: $0) }
    }

    /// Keeps a string to be reused by later messages.
    func remember(_ string: String) {
        cache.remember(string, for: string)
    }
}
