// SPDX-License-Identifier: Apache-2.0

public import DBus

/// The administrator's layer: machine-wide defaults and locks, from the files of a folder such as
/// `/etc/settingsbus/`.
///
/// - `defaults.d/*.conf`: keyfiles in the format of `settingsctl dump` and `dconf dump` (``Keyfile``, groups
///   relative to `/`): each value is the key's default for every user, over the schema's.
/// - `locks.d/*`: one key or directory (ending in `/`) per line, `#` comments; a directory locks every key
///   below it. A locked key cannot be written by anyone, and reads the administrator's default when there is
///   one, else the schema's: a user value kept from before the lock wins again when it is lifted.
///
/// Files are read in the order of their names (bytes), and a later file's default for a key replaces an
/// earlier one's; names starting with `.` or ending in `~` are skipped. This is the layout of a dconf system
/// database's source folder (`/etc/dconf/db/local.d/` and its `locks/`), whose files are used unchanged.
public struct AdministratorLayer: Sendable, Equatable {
    /// Where an entry came from: a file and a line in it.
    public struct Source: Sendable, Hashable, CustomStringConvertible {
        /// The file's path.
        public var file: String
        /// The line, counted from 1.
        public var line: Int

        public init(file: String, line: Int) {
            self.file = file
            self.line = line
        }

        /// `file:line`.
        public var description: String { "\(file):\(line)" }
    }

    /// An administrator's default: the value and where it was given.
    public struct Default: Sendable, Equatable {
        public var value: DBusValue
        public var source: Source
    }

    /// What is wrong with one of the files; the file is skipped as a whole.
    public typealias Problem = FileProblem

    /// The kind of a file, from the folder it is in.
    public enum FileKind: String, Sendable, Hashable {
        /// A keyfile of defaults, in `defaults.d/`.
        case defaults = "defaults.d"
        /// A list of locked keys and directories, in `locks.d/`.
        case locks = "locks.d"
    }

    /// What one file says.
    public struct FileContent: Sendable, Equatable {
        public var defaults: [SettingPath: Default] = [:]
        public var locks: [SettingLocation: Source] = [:]

        public init() {}
    }

    /// The defaults, by key.
    public private(set) var defaults: [SettingPath: Default] = [:]
    /// The locked keys and directories, with the line that locked each.
    public private(set) var locks: [SettingLocation: Source] = [:]
    /// Whether any directory is locked (the lookup of a key's lock walks its parents only then).
    private var locksDirectories = false

    /// No defaults and no locks.
    public init() {}

    /// The layer of files read in the order given (a later file's default replaces an earlier one's).
    public init(files: [FileContent]) {
        for file in files {
            defaults.merge(file.defaults) { _, later in later }
            locks.merge(file.locks) { earlier, _ in earlier }
        }
        locksDirectories = locks.keys.contains { if case .directory = $0 { true } else { false } }
    }

    /// Whether the layer has no defaults and no locks.
    public var isEmpty: Bool { defaults.isEmpty && locks.isEmpty }

    /// What locks `key`: the key's own line, or that of the nearest locked directory above it; nil when it is
    /// not locked.
    public func lock(of key: SettingPath) -> Source? {
        if let source = locks[.key(key)] { return source }
        guard locksDirectories else { return nil }
        var directory = key.parent
        while true {
            if let source = locks[.directory(directory)] { return source }
            guard let parent = directory.parent else { return nil }
            directory = parent
        }
    }

    /// The locks that hold keys under `directory`: the locked keys and directories inside it, and a locked
    /// directory that holds it, sorted by their text.
    public func locks(under directory: SettingDirectory) -> [SettingLocation] {
        locks.keys.filter { location in
            switch location {
            case .key(let key): directory.contains(key)
            case .directory(let locked): directory.contains(locked) || locked.contains(directory)
            }
        }.sorted { $0.rawValue.utf8.lexicographicallyPrecedes($1.rawValue.utf8) }
    }

    /// The direct children of a directory that its defaults name, as `List` names them: key names, and
    /// subdirectory names ending in `/`.
    public func children(of directory: SettingDirectory) -> Set<String> {
        Set(defaults.keys.lazy.filter(directory.contains).map { directory.childName(holding: $0.rawValue) })
    }

    /// Whether the file name is one the layer reads: not hidden, not a backup (`~`), and in `defaults.d/`
    /// ending in `.conf`.
    public static func reads(_ name: String, as kind: FileKind) -> Bool {
        guard !name.hasPrefix("."), !name.hasSuffix("~") else { return false }
        return kind == .locks || name.hasSuffix(".conf")
    }

    /// Reads one file's text.
    ///
    /// - Parameter file: the file's path, for ``Source`` and ``Problem``.
    /// - Throws: the first ``Problem`` of the file: a line that is not valid, a key or directory that breaks
    ///   the key grammar, a value that is not GVariant text or is past the limits of a stored value.
    public static func parse(_ text: String, as kind: FileKind, file: String) throws(Problem) -> FileContent {
        let (content, problems) = read(text, as: kind, file: file)
        if let first = problems.first { throw first }
        return content
    }

    /// Every problem of one file's text, in the order of its lines (what `settingsctl check-admin` lists).
    public static func problems(in text: String, as kind: FileKind, file: String) -> [Problem] {
        read(text, as: kind, file: file).problems
    }

    private static func read(_ text: String, as kind: FileKind, file: String) -> (FileContent, problems: [Problem]) {
        var content = FileContent()
        var problems: [Problem] = []
        switch kind {
        case .defaults:
            let (entries, keyfileProblems) = Keyfile.parseAll(text, under: .root)
            problems = keyfileProblems.map { Problem(file: file, line: $0.line, message: $0.message) }
            for entry in entries {
                do throws(SettingsError) {
                    try entry.value.validateForStorage(at: entry.key)
                    content.defaults[entry.key] = Default(
                        value: entry.value, source: Source(file: file, line: entry.line))
                } catch {
                    problems.append(Problem(file: file, line: entry.line, message: error.message))
                }
            }
            problems.sort { ($0.line ?? 0) < ($1.line ?? 0) }
        case .locks:
            for (index, rawLine) in LineText.lines(text).enumerated() {
                let line = LineText.trimmed(rawLine)
                if line.isEmpty || line.hasPrefix("#") { continue }
                do throws(SettingsError) {
                    let location = try SettingLocation(line)
                    if content.locks[location] == nil {
                        content.locks[location] = Source(file: file, line: index + 1)
                    }
                } catch {
                    problems.append(
                        Problem(
                            file: file, line: index + 1,
                            message: "'\(LineText.excerpt(line))' is not a key or directory: \(error.message)"))
                }
            }
        }
        return (content, problems)
    }
}

/// What is wrong with a file a broker reads (an administrator's file, a schema file), and on which line; such a
/// file is skipped as a whole.
public struct FileProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file's path.
    public var file: String
    /// The line, counted from 1; nil for a problem with the whole file (it cannot be read).
    public var line: Int?
    /// What is wrong, for people.
    public var message: String

    /// - Parameter message: kept to its first 400 characters (then `…`), control
    ///   characters shown as `�`: a problem quotes a line of a file, which may be of any length.
    public init(file: String, line: Int?, message: String) {
        self.file = file
        self.line = line
        self.message = LineText.excerpt(message, limit: FileBounds.maximumMessage)
    }

    /// `file: line N: message`.
    public var description: String { "\(file)" + (line.map { ": line \($0)" } ?? "") + ": \(message)" }
}
