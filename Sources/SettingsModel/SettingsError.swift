// SPDX-License-Identifier: Apache-2.0

public import DBus

/// An error of the settings bus, with a code to match on and a message a person can act on.
///
/// The broker answers every refused call with one of these, sent as a D-Bus error named
/// `io.github.settingsbus.Settings1.Error.<Name>`; the client library turns such replies back into a
/// `SettingsError` with the same code and message. `Code` maps each code to its D-Bus error name and back, in
/// one table.
///
/// Errors compare and hash by ``code`` only, so a test can write `#expect(throws: SettingsError.outOfRange)`-style
/// checks without spelling out the message; the message, file and line are kept for people reading logs.
///
/// ```swift
/// do {
///     try schema.validate(.uint32(120), for: volume)
/// } catch let error where error.code == .outOfRange {
///     print(error.message)   // value 120 is out of range 0…100 for /org/example/volume
/// }
/// ```
public struct SettingsError: Error, Sendable {
    /// What kind of failure this is.
    public let code: Code
    /// A message for people, saying what is wrong and, where possible, how to fix it.
    public let message: String
    /// The source file that raised the error.
    public let file: String
    /// The source line that raised the error.
    public let line: Int

    /// Makes an error with a code and a message.
    ///
    /// - Parameters:
    ///   - code: The kind of failure.
    ///   - message: A message a person can act on.
    public init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    /// Makes an error from a D-Bus error reply, when the reply's name is one of the settings bus error names.
    ///
    /// - Parameters:
    ///   - dbusErrorName: The error name of the reply, such as `io.github.settingsbus.Settings1.Error.UnknownKey`.
    ///   - message: The message of the reply, kept as it is.
    /// - Returns: `nil` when the name is not in the table of `Code`.
    public init?(dbusErrorName: String, message: String, file: String = #fileID, line: Int = #line) {
        guard let code = Code(dbusErrorName: dbusErrorName) else { return nil }
        self.init(code, message, file: file, line: line)
    }

    /// Makes an error from a `DBusError` whose name is in the table of `Code`.
    ///
    /// - Returns: `nil` when the error's name is not one the settings bus uses.
    public init?(_ error: DBusError, file: String = #fileID, line: Int = #line) {
        self.init(dbusErrorName: error.name.rawValue, message: error.message, file: file, line: line)
    }

    /// The error as a D-Bus error, ready to be sent as a method's error reply.
    public var dbusError: DBusError {
        DBusError(DBusError.Name(rawValue: code.dbusErrorName), message)
    }
}

// MARK: - Static constructors

extension SettingsError {
    /// Makes an ``Code/invalidKey`` error: a key or directory breaks the path grammar.
    public static func invalidKey(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.invalidKey, message, file: file, line: line)
    }

    /// Makes an ``Code/unknownKey`` error: the key has neither a value nor a registered default.
    public static func unknownKey(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.unknownKey, message, file: file, line: line)
    }

    /// Makes a ``Code/typeMismatch`` error: a value's type differs from the key's registered type.
    public static func typeMismatch(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.typeMismatch, message, file: file, line: line)
    }

    /// Makes an ``Code/outOfRange`` error: a value lies outside the key's range or choices.
    public static func outOfRange(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.outOfRange, message, file: file, line: line)
    }

    /// Makes a ``Code/notWritable`` error: the key may not be written.
    public static func notWritable(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.notWritable, message, file: file, line: line)
    }

    /// Makes a ``Code/schemaConflict`` error: a key is registered again with a different schema.
    public static func schemaConflict(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.schemaConflict, message, file: file, line: line)
    }

    /// Makes a ``Code/conflict`` error: a compare-and-set found a key changed after the given serial.
    public static func conflict(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.conflict, message, file: file, line: line)
    }

    /// Makes an ``Code/invalidValue`` error: a value, its text or a schema is malformed.
    public static func invalidValue(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.invalidValue, message, file: file, line: line)
    }

    /// Makes a ``Code/tooLarge`` error: a value exceeds a size or nesting limit.
    public static func tooLarge(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.tooLarge, message, file: file, line: line)
    }

    /// Makes a ``Code/storeFailure`` error: the broker could not read or write its store.
    public static func storeFailure(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.storeFailure, message, file: file, line: line)
    }

    /// Makes an ``Code/accessDenied`` error: the caller may not read a secret key's value.
    public static func accessDenied(_ message: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.accessDenied, message, file: file, line: line)
    }
}

// MARK: - Equatable, Hashable

extension SettingsError: Hashable {
    /// Compares two errors by their code only; messages, files and lines are ignored.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    /// Hashes the code only, matching ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

// MARK: - CustomStringConvertible

extension SettingsError: CustomStringConvertible {
    /// The code's D-Bus error name and the message, for logs.
    public var description: String { "\(code.dbusErrorName): \(message)" }
}
