// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The properties the fuzz targets check on every input, as plain functions: a libFuzzer executable traps
/// when one fails, and the corpus replay test runs every file under `Fuzz/corpus` and `Fuzz/regressions`
/// through the same function.
///
/// Each check feeds arbitrary bytes to a parser that faces input from outside the process, and fails when
/// the parser crashes (the process dies) or breaks a promise its documentation makes.
public enum FuzzCheck: String, CaseIterable, Sendable {
    /// Keys, directories and locations from arbitrary text (`SettingPath`, `SettingDirectory`,
    /// `SettingLocation`): the grammar's promises, and that exactly the valid texts are accepted.
    case keyPath = "key-path"
    /// GVariant text (`GVariantText.parse`), with a type or without: a value either parses and passes
    /// `validate()`, or a `GVariantTextError` is thrown; what parses prints and reads back the same.
    case gvariantText = "gvariant-text"
    /// A D-Bus message in the wire format (`DBusMessage(marshalled:)`), then each argument as the broker
    /// stores it: checked with `validateForStorage`, written as GVariant text, read back the same; the size
    /// bound the broker relies on holds; the message marshals and reads back the same; read from its bytes,
    /// as a connection reads what it receives, it is the message libdbus's accessors and iterator read.
    case dbusValue = "dbus-value"

    /// Runs the check on one input.
    ///
    /// - Returns: whether the parser accepted the input (and the checks of what it made passed) or refused it
    ///   with its documented error.
    /// - Throws: ``FuzzFailure`` naming the promise that was broken and the values involved.
    @discardableResult
    public func run(_ bytes: [UInt8]) throws(FuzzFailure) -> FuzzOutcome {
        switch self {
        case .keyPath: try KeyPathCheck.run(String(decoding: bytes, as: UTF8.self))
        case .gvariantText: try GVariantTextCheck.run(bytes)
        case .dbusValue: try DBusValueCheck.run(bytes)
        }
    }
}

/// What a parser did with an input that broke no promise.
public enum FuzzOutcome: Sendable {
    /// It made a value (or key, or message), which passed the checks.
    case accepted
    /// It refused the input with its documented error.
    case refused
}

/// A broken promise found by a ``FuzzCheck``.
public struct FuzzFailure: Error, CustomStringConvertible {
    /// What went wrong, with the values involved.
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Fails with the message unless the condition holds.
func require(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzFailure) {
    if !condition { throw FuzzFailure(message()) }
}

/// Whether two values are the same for a store: equal, with doubles compared bit for bit but any NaN equal to
/// any NaN (GVariant text writes every NaN as `nan`).
func identical(_ a: DBusValue, _ b: DBusValue) -> Bool {
    switch (a, b) {
    case (.double(let x), .double(let y)):
        return x.isNaN ? y.isNaN : x.bitPattern == y.bitPattern
    case (.variant(let x), .variant(let y)):
        return identical(x, y)
    case (.array(let xType, let xs), .array(let yType, let ys)):
        return xType == yType && xs.count == ys.count && zip(xs, ys).allSatisfy { identical($0, $1) }
    case (.dictionary(let xKey, let xValue, let xs), .dictionary(let yKey, let yValue, let ys)):
        return xKey == yKey && xValue == yValue && xs.count == ys.count
            && zip(xs, ys).allSatisfy { identical($0.key, $1.key) && identical($0.value, $1.value) }
    case (.structure(let xs), .structure(let ys)):
        return xs.count == ys.count && zip(xs, ys).allSatisfy { identical($0, $1) }
    default:
        return a == b
    }
}

/// Fails unless GVariant text reads back, with the type given (or none), as exactly the value.
///
/// - Parameter shown: what the text is, for the failure's message (`'x' printed as`).
func readsBack(_ value: DBusValue, from text: String, as type: DBusType?, shown: String) throws(FuzzFailure) {
    let again: DBusValue
    do {
        again = try GVariantText.parse(text, as: type)
    } catch {
        throw FuzzFailure("\(shown) \(text.debugDescription) does not read back: \(error)")
    }
    try require(identical(again, value), "\(shown) \(text.debugDescription) reads back as \(again), not \(value)")
}
