// SPDX-License-Identifier: Apache-2.0

/// The grammar of keys and directories, after dconf's `common/dconf-paths.c`, with a narrower character set.
///
/// A path is `/` followed by segments separated by `/`. A key never ends with `/`; a directory always does, and
/// `/` alone is the root directory. No segment is empty (`//` never appears) and segments use only
/// `[A-Za-z0-9._:-]` (the colon for the paths GNOME apps place relocatable schemas at, such as GNOME
/// Terminal's `/org/gnome/terminal/legacy/profiles:/:<uuid>/`, which a move from dconf must keep). The whole path is at most ``SettingPath/maximumLength`` UTF-8 bytes.
enum SettingPathGrammar {
    /// What a path must be.
    enum Kind: String {
        case key
        case directory
    }

    /// Returns `nil` when the text is a valid path of the kind, else why it is not.
    static func problem(in text: String, as kind: Kind) -> String? {
        // Over the text's bytes in place: a broker checks every key of its store at start-up (100,000 and
        // more), and stepping through a `String.UTF8View` showed in the profile of that start.
        if let found = text.utf8.withContiguousStorageIfAvailable({ problem(in: $0, of: text, as: kind) }) {
            return found
        }
        return problem(in: Array(text.utf8), of: text, as: kind)
    }

    private static func problem(in bytes: some Collection<UInt8>, of text: String, as kind: Kind) -> String? {
        guard let first = bytes.first else {
            return "it is empty; a \(kind.rawValue) starts with '/', as in \(example(kind))"
        }
        guard bytes.count <= SettingPath.maximumLength else {
            return "it is \(bytes.count) bytes long; at most \(SettingPath.maximumLength) bytes are allowed"
        }
        guard first == slash else {
            return "a \(kind.rawValue) must start with '/', as in \(example(kind))"
        }
        var offset = 0
        var previous: UInt8 = 0
        for byte in bytes {
            if byte == slash {
                if previous == slash {
                    return "empty segment at byte \(offset) ('//' is not allowed)"
                }
            } else if !isSegmentByte(byte) {
                return "character \(describe(byte: byte, in: text, at: offset)) at byte \(offset) is not allowed; "
                    + "segments use only the letters A-Z and a-z, the digits 0-9 and '.', '_', '-', ':'"
            }
            previous = byte
            offset += 1
        }
        switch kind {
        case .key where previous == slash:
            return bytes.count == 1
                ? "'/' is the root directory, not a key; a key looks like \(example(.key))"
                : "a key must not end with '/'; a path ending in '/' names a directory"
        case .directory where previous != slash:
            return "a directory must end with '/'; a path without a trailing '/' names a key"
        default:
            return nil
        }
    }

    /// The error for text that is not a valid path of the kind.
    static func error(for text: String, as kind: Kind, problem: String) -> SettingsError {
        .invalidKey("invalid \(kind.rawValue) \(quoted(text)): \(problem)")
    }

    static let slash = UInt8(ascii: "/")

    static func isSegmentByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"),
            UInt8(ascii: ":"):
            return true
        default:
            return false
        }
    }

    static func example(_ kind: Kind) -> String {
        kind == .key ? "'/org/example/editor/theme'" : "'/org/example/editor/'"
    }

    /// Names the character that starts at a byte offset, escaping what would not print.
    static func describe(byte: UInt8, in text: String, at offset: Int) -> String {
        let utf8 = text.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: offset)
        if let scalarIndex = start.samePosition(in: text.unicodeScalars) {
            let scalar = text.unicodeScalars[scalarIndex]
            if scalar.value >= 0x20, scalar.value != 0x7F, scalar.properties.generalCategory != .control {
                return "'\(scalar)'"
            }
            return "U+" + hex(scalar.value, width: 4)
        }
        return "byte 0x" + hex(UInt32(byte), width: 2)
    }

    /// Quotes text for a message, cut to 80 characters, with control characters escaped.
    static func quoted(_ text: String) -> String {
        var shown = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == 80 {
                shown += "…"
                break
            }
            if scalar.value < 0x20 || scalar.value == 0x7F {
                shown += "\\u{" + hex(scalar.value, width: 1) + "}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
            count += 1
        }
        return "'\(shown)'"
    }

    static func hex(_ value: UInt32, width: Int) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// The length of the longest common prefix of two byte sequences.
    static func commonPrefixLength(_ lhs: String.UTF8View, _ rhs: String.UTF8View) -> Int {
        var length = 0
        for (left, right) in zip(lhs, rhs) {
            guard left == right else { break }
            length += 1
        }
        return length
    }
}
