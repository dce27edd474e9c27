// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsModel

/// A keyfile read as it arrives, line by line: `settingsctl load`'s input.
///
/// The lines are judged as soon as they are read (the whole lines of each read of 64 KiB together), so input
/// that is not a keyfile is refused at its first wrong line without the rest being read; what is kept is what
/// the lines set (their entries and `#schema` lines), never the whole text. The lines are read by
/// ``SettingsModel/Keyfile/parseTexts(_:under:keepingComments:)`` after the line of their group, so the format
/// has one reader.
struct KeyfileInput {
    /// The longest line read: sixteen times the largest value a key holds (``SettingsBusNames/maximumValueSize``),
    /// more than the GVariant text of any value a key can hold takes.
    static let maximumLineLength = 16 * SettingsBusNames.maximumValueSize

    /// The bytes read at a time.
    static let chunkSize = 1 << 16

    /// The directory the groups are relative to.
    let directory: SettingDirectory
    /// The line of the group the lines read are in, trimmed; nil before the first one.
    private var groupLine: String?
    /// The number of the last line read, counted from 1.
    private var number = 0
    /// The entries' paths, in the order they were first given.
    private var order: [String] = []
    private var entries: [String: Keyfile.TextEntry] = [:]
    private var comments: [Keyfile.Comment] = []

    init(under directory: SettingDirectory) {
        self.directory = directory
    }

    /// Reads a file, or standard input when `path` is nil or `-`, to its end, and returns what it sets.
    ///
    /// - Throws: ``CtlError`` naming the first line that is wrong (not UTF-8, too long, or not of the format),
    ///   thrown as soon as the read that ends that line; or one saying the file cannot be read.
    static func read(_ path: String?, under directory: SettingDirectory) throws(CtlError) -> DconfKeyfile.Contents {
        let name = path.flatMap { $0 == "-" ? nil : $0 }
        let handle: FileHandle
        if let name {
            guard let opened = FileHandle(forReadingAtPath: name) else {
                throw CtlError(.failure, "cannot read \(name): no such file, or not readable")
            }
            handle = opened
        } else {
            handle = FileHandle.standardInput
        }
        var input = KeyfileInput(under: directory)
        var pending: [UInt8] = []
        while true {
            let chunk: Data
            do {
                chunk = try handle.read(upToCount: chunkSize) ?? Data()
            } catch {
                throw CtlError(.failure, "cannot read \(name ?? "standard input"): \(error.localizedDescription)")
            }
            if chunk.isEmpty { break }
            // The whole lines read so far are judged together; only the new bytes are looked through for a
            // newline, since the pending ones have none.
            let searched = pending.count
            pending.append(contentsOf: chunk)
            if let end = pending[searched...].lastIndex(of: UInt8(ascii: "\n")) {
                try input.add(pending[..<end])
                pending.removeFirst(end + 1)
            }
            if pending.count > maximumLineLength {
                throw CtlError(
                    .invalid, "line \(input.number + 1): longer than \(maximumLineLength) bytes, the longest line read")
            }
        }
        if !pending.isEmpty { try input.add(pending[...]) }
        return try input.contents()
    }

    /// Judges whole lines (the last without its newline) and keeps what they set.
    mutating func add(_ bytes: ArraySlice<UInt8>) throws(CtlError) {
        let first = number + 1
        number += Self.newlines(in: bytes) + 1
        guard let text = String(validating: bytes, as: UTF8.self) else {
            var line = first
            for piece in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
                if String(validating: piece, as: UTF8.self) == nil { break }
                line += 1
            }
            throw CtlError(.invalid, "line \(line): not UTF-8 text")
        }
        // The lines are read after the line of the group they are in, and numbered as in the whole input.
        let context = groupLine.map { $0 + "\n" } ?? ""
        let shift = first - 1 - (groupLine == nil ? 0 : 1)
        let parsed: (entries: [Keyfile.TextEntry], comments: [Keyfile.Comment])
        do throws(Keyfile.Problem) {
            parsed = try Keyfile.parseTexts(context + text, under: directory, keepingComments: DconfKeyfile.schemaPrefix)
        } catch {
            throw CtlError(.invalid, "line \(error.line + shift): \(error.message)")
        }
        for var entry in parsed.entries {
            entry.line += shift
            if entries.updateValue(entry, forKey: entry.path) == nil { order.append(entry.path) }
        }
        for var comment in parsed.comments {
            comment.line += shift
            comments.append(comment)
        }
        if let group = Self.lastGroupLine(in: bytes) { groupLine = group }
    }

    /// The number of newlines in the bytes (counted with `memchr`, which a debug build does not slow down).
    static func newlines(in bytes: ArraySlice<UInt8>) -> Int {
        bytes.withUnsafeBytes { buffer in
            guard var next = buffer.baseAddress else { return 0 }
            let end = next + buffer.count
            var count = 0
            while next < end, let found = memchr(next, Int32(UInt8(ascii: "\n")), end - next) {
                count += 1
                next = UnsafeRawPointer(found) + 1
            }
            return count
        }
    }

    /// The last `[group]` line of whole lines, trimmed: the last line whose first byte that is not white space
    /// is `[`.
    static func lastGroupLine(in bytes: ArraySlice<UInt8>) -> String? {
        var end = bytes.endIndex
        while end > bytes.startIndex {
            let start = bytes[..<end].lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? bytes.startIndex
            let line = bytes[start..<end]
            if line.first(where: { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") && $0 != UInt8(ascii: "\r") })
                == UInt8(ascii: "[")
            {
                return LineText.trimmed(String(decoding: line, as: UTF8.self))
            }
            end = start == bytes.startIndex ? start : start - 1
        }
        return nil
    }

    /// What the lines read set, with the schemas of their `#schema` lines.
    func contents() throws(CtlError) -> DconfKeyfile.Contents {
        try DconfKeyfile.contents(entries: order.map { entries[$0]! }, comments: comments)
    }
}
