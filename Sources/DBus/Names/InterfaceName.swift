// SPDX-License-Identifier: Apache-2.0

/// A D-Bus interface name such as `io.github.settingsbus.Settings1`.
///
/// Valid: `org.freedesktop.DBus.Peer`, `a.b`. Invalid: `a`, `a..b`, `a.1b`, `a-b.c`.
///
/// The throwing initialiser checks the grammar of the D-Bus specification, so a `InterfaceName` can always be handed
/// to libdbus. A string literal that breaks the grammar is a programmer error and traps.
public struct InterfaceName: Sendable, Hashable, Comparable {
    /// The name text.
    public let rawValue: String

    /// Validates and wraps a name.
    ///
    /// - Throws: `DBusError` named `org.freedesktop.DBus.Error.InvalidArgs`, saying which rule is broken.
    public init(_ text: String) throws(DBusError) {
        try NameValidation.check(text, as: .interface)
        rawValue = text
    }

    /// Orders names by their text.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

// MARK: - ExpressibleByStringLiteral

extension InterfaceName: ExpressibleByStringLiteral {
    /// Makes a name from a literal that is known to be valid; an invalid literal traps.
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("invalid literal: \(error.message)") }
    }
}

// MARK: - CustomStringConvertible

extension InterfaceName: CustomStringConvertible {
    public var description: String { rawValue }
}

extension InterfaceName {
    /// Wraps text that libdbus has already validated (a header field or argument of a received message).
    init(trusted text: String) { rawValue = text }
}
