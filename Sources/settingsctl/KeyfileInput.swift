// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsModel

/// A keyfile read as it arrives, line by line: `settingsctl load`'s input.
///
/// Each line is judged as soon as it is read, so input that is not a keyfile is refused at its first wrong line
/// without the rest being read; what is kept is what the lines set (their entries and `#schema` lines), never
/// the whole text. Each line is read by ``SettingsModel/Keyfile/parseTexts(_:under:keepingComments:)`` after
/// its group's line, so the format has one reader.
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
    ///   thrown as soon as that line has been read; or one saying the file cannot be read.
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
            // Only the new bytes are looked through for newlines: the pending ones have none.
            var searched = pending.count
            pending.append(contentsOf: chunk)
            var start = 0
            while let end = pending[searched...].firstIndex(of: UInt8(ascii: "\n")) {
                try input.add(pending[start..<end])
                start = end + 1
                searched = start
            }
            pending.removeFirst(start)
            if pending.count > maximumLineLength {
                throw CtlError(
                    .invalid, "line \(input.number + 1): longer than \(maximumLineLength) bytes, the longest line read")
            }
        }
        if !pending.isEmpty { try input.add(pending[...]) }
        return try input.contents()
    }

    /// Judges one line (without its newline) and keeps what it sets.
    mutating func add(_ bytes: ArraySlice<UInt8>) throws(CtlError) {
        number += 1
        guard let line = String(validating: bytes, as: UTF8.self) else {
            throw CtlError(.invalid, "line \(number): not UTF-8 text")
        }
        let parsed: (entries: [Keyfile.TextEntry], comments: [Keyfile.Comment])
        let context = groupLine.map { $0 + "\n" } ?? ""
        do throws(Keyfile.Problem) {
            parsed = try Keyfile.parseTexts(context + line, under: directory, keepingComments: DconfKeyfile.schemaPrefix)
        } catch {
            throw CtlError(.invalid, "line \(number): \(error.message)")
        }
        for var entry in parsed.entries {
            entry.line = number
            if entries.updateValue(entry, forKey: entry.path) == nil { order.append(entry.path) }
        }
        for var comment in parsed.comments {
            comment.line = number
            comments.append(comment)
        }
        if parsed.entries.isEmpty, parsed.comments.isEmpty {
            let trimmed = LineText.trimmed(line)
            if trimmed.hasPrefix("[") { groupLine = trimmed }
        }
    }

    /// What the lines read set, with the schemas of their `#schema` lines.
    func contents() throws(CtlError) -> DconfKeyfile.Contents {
        try DconfKeyfile.contents(entries: order.map { entries[$0]! }, comments: comments)
    }
}
