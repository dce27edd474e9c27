// SPDX-License-Identifier: Apache-2.0

import SettingsModel

/// The promises of the key grammar, checked on arbitrary text.
enum KeyPathCheck {
    static func run(_ text: String) throws(FuzzFailure) -> FuzzOutcome {
        let key: SettingPath?
        do {
            key = try SettingPath(text)
        } catch {
            try require(error.code == .invalidKey, "SettingPath(\(text.debugDescription)) threw \(error.code)")
            key = nil
        }
        let directory: SettingDirectory?
        do {
            directory = try SettingDirectory(text)
        } catch {
            try require(error.code == .invalidKey, "SettingDirectory(\(text.debugDescription)) threw \(error.code)")
            directory = nil
        }
        try require(
            SettingPath.isValidKey(text) == (key != nil),
            "isValidKey and SettingPath disagree on \(text.debugDescription)")
        try require(
            SettingDirectory.isValidDirectory(text) == (directory != nil),
            "isValidDirectory and SettingDirectory disagree on \(text.debugDescription)")
        try require(key == nil || directory == nil, "\(text.debugDescription) is both a key and a directory")

        let location = try? SettingLocation(text)
        switch location {
        case .key(let parsed)?:
            try require(parsed == key, "SettingLocation read \(text.debugDescription) as a key SettingPath refuses")
        case .directory(let parsed)?:
            try require(parsed == directory, "SettingLocation read \(text.debugDescription) as a wrong directory")
        case nil:
            try require(key == nil && directory == nil, "SettingLocation refused \(text.debugDescription)")
        }

        if key != nil || directory != nil {
            try checkGrammar(text)
        }
        if let key {
            try require(key.rawValue == text, "the key \(text.debugDescription) was changed to \(key.rawValue)")
            try require(key.parent.contains(key), "\(key.parent) does not contain its key \(key)")
            let rebuilt = try? key.parent.key(named: key.name)
            try require(rebuilt == key, "\(key.parent) + \(key.name.debugDescription) is not \(key)")
            try require(
                "/" + key.segments.joined(separator: "/") == text, "the segments of \(key) do not rebuild it")
        }
        if let directory {
            try require(directory.rawValue == text, "the directory \(text.debugDescription) was changed")
            try require(directory.contains(directory), "\(directory) does not contain itself")
            if let parent = directory.parent, let name = directory.segments.last {
                try require(parent.contains(directory), "\(parent) does not contain \(directory)")
                let rebuilt = try? parent.subdirectory(named: name)
                try require(rebuilt == directory, "\(parent) + \(name.debugDescription) is not \(directory)")
            } else {
                try require(directory.isRoot, "\(directory) has no parent but is not the root")
            }
        }
        return key != nil || directory != nil ? .accepted : .refused
    }

    /// What every accepted text must look like, checked byte by byte apart from the grammar's own code: a
    /// leading `/`, no empty segment, only `[A-Za-z0-9._:-]` in segments, at most 1024 bytes, and so no NUL,
    /// no space, nothing outside ASCII.
    private static func checkGrammar(_ text: String) throws(FuzzFailure) {
        let bytes = Array(text.utf8)
        try require(bytes.first == UInt8(ascii: "/"), "accepted \(text.debugDescription) without a leading '/'")
        try require(bytes.count <= SettingPath.maximumLength, "accepted a path of \(bytes.count) bytes")
        for (offset, byte) in bytes.enumerated() {
            let allowed =
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || [UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: ":"), UInt8(ascii: "/")].contains(byte)
            try require(allowed, "accepted \(text.debugDescription) with byte \(byte) at \(offset)")
            if byte == UInt8(ascii: "/"), offset > 0 {
                try require(bytes[offset - 1] != byte, "accepted \(text.debugDescription) with '//'")
            }
        }
    }
}
