// SPDX-License-Identifier: Apache-2.0

/// Either a key or a directory: the argument of `Reset` and the `path` of a `Changed` signal.
///
/// Text ending in `/` is a directory, any other text a key; both follow the grammar of ``SettingPath``.
///
/// Valid: `/`, `/org/example/`, `/org/example/theme`. Invalid: ``, `org`, `/a//b`, `/a b`.
///
/// ```swift
/// let location = try SettingLocation("/org/example/")   // .directory(/org/example/)
/// location.contains(try SettingPath("/org/example/theme"))   // true
/// ```
public enum SettingLocation: Sendable, Hashable {
    /// One key.
    case key(SettingPath)
    /// A directory and everything below it.
    case directory(SettingDirectory)

    /// Validates text as a directory when it ends with `/`, else as a key.
    ///
    /// - Throws: ``SettingsError`` with code ``SettingsError/Code/invalidKey`` naming the rule broken.
    public init(_ text: String) throws(SettingsError) {
        if text.utf8.last == SettingPathGrammar.slash {
            self = .directory(try SettingDirectory(text))
        } else {
            self = .key(try SettingPath(text))
        }
    }

    /// The text of the key or directory.
    public var rawValue: String {
        switch self {
        case .key(let key): return key.rawValue
        case .directory(let directory): return directory.rawValue
        }
    }

    /// Returns whether the location is the key, or a directory containing it.
    public func contains(_ key: SettingPath) -> Bool {
        switch self {
        case .key(let own): return own == key
        case .directory(let directory): return directory.contains(key)
        }
    }

    /// Returns the location a `Changed` signal reports for a set of changed keys: the key itself when there is
    /// one distinct key, else the longest directory that contains them all.
    ///
    /// A client that subscribes with `arg0path='/org/example/theme'` or `arg0path='/org/example/'` then receives
    /// exactly the signals that may concern it.
    ///
    /// ```swift
    /// SettingLocation.enclosing([theme])               // .key(/org/example/theme)
    /// SettingLocation.enclosing([theme, fontSize])     // .directory(/org/example/)
    /// ```
    /// - Returns: `nil` when `keys` is empty.
    public static func enclosing(_ keys: some Collection<SettingPath>) -> SettingLocation? {
        guard let first = keys.first else { return nil }
        if keys.allSatisfy({ $0 == first }) { return .key(first) }
        return SettingDirectory.commonDirectory(of: keys).map(SettingLocation.directory)
    }

    /// Returns the location that encloses several locations: the location itself when all are equal, else the
    /// longest directory containing them all.
    ///
    /// - Returns: `nil` when `locations` is empty.
    public static func enclosing(_ locations: some Collection<SettingLocation>) -> SettingLocation? {
        guard let first = locations.first else { return nil }
        if locations.allSatisfy({ $0 == first }) { return first }
        return SettingDirectory.commonDirectory(ofTexts: locations.lazy.map(\.rawValue)).map(SettingLocation.directory)
    }
}

// MARK: - Comparable

extension SettingLocation: Comparable {
    /// Orders locations by their UTF-8 bytes.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }
}

// MARK: - CustomStringConvertible

extension SettingLocation: CustomStringConvertible {
    /// The text of the key or directory.
    public var description: String { rawValue }
}
