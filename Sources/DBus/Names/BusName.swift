// SPDX-License-Identifier: Apache-2.0

/// A bus name, unique (`:1.42`) or well-known (`io.github.settingsbus.Settings1`).
///
/// Valid: `:1.42`, `org.freedesktop.DBus`, `io.github.settingsbus.Settings1`. Invalid: `""`, `org`, `.org.x`,
/// `org..x`, `1org.x`, `:1`.
///
/// The throwing initialiser checks the grammar of the D-Bus specification, so a `BusName` can always be handed
/// to libdbus. A string literal that breaks the grammar is a programmer error and traps.
public struct BusName: Sendable, Hashable, Comparable {
    /// The name text.
    public let rawValue: String

    /// Validates and wraps a name.
    ///
    /// - Throws: `DBusError` named `org.freedesktop.DBus.Error.InvalidArgs`, saying which rule is broken.
    public init(_ text: String) throws(DBusError) {
        try NameValidation.check(text, as: .busName)
        rawValue = text
    }

    /// Orders names by their text.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

// MARK: - ExpressibleByStringLiteral

extension BusName: ExpressibleByStringLiteral {
    /// Makes a name from a literal that is known to be valid; an invalid literal traps.
    public init(stringLiteral value: String) {
        do { try self.init(value) } catch { preconditionFailure("invalid literal: \(error.message)") }
    }
}

// MARK: - CustomStringConvertible

extension BusName: CustomStringConvertible {
    public var description: String { rawValue }
}

extension BusName {
    /// Wraps text that libdbus has already validated (a header field or argument of a received message).
    init(trusted text: String) { rawValue = text }
}
