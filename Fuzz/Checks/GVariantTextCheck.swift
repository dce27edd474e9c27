// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The promises of ``GVariantText``, checked on arbitrary text.
///
/// The first byte of an input picks the type to parse as (none, or one of ``types``); the rest is the text, so
/// that the fuzzer explores typed and untyped parsing alike.
enum GVariantTextCheck {
    /// The types an input can ask for: `nil` (infer the type from the text) and the types keys use.
    static let types: [DBusType?] = [nil] + [
        "s", "i", "u", "d", "b", "y", "n", "q", "x", "t", "o", "g", "v", "as", "ai", "ay", "ad", "av", "aas",
        "a{sv}", "a{ss}", "a{ias}", "(si)", "(dd)", "(sv)", "a(iu)", "a{sa{sv}}", "(ybnqiuxtdsogv)",
    ].map { try? DBusType(parsing: $0) }

    static func run(_ bytes: [UInt8]) throws(FuzzFailure) -> FuzzOutcome {
        guard let selector = bytes.first else { return .refused }
        let type = types[Int(selector) % types.count]
        let text = String(decoding: bytes.dropFirst(), as: UTF8.self)
        try checkShortcut(text, as: type)
        if let type { try checkBytes(Array(bytes.dropFirst()), of: text, as: type) }
        let value: DBusValue
        do {
            value = try GVariantText.parse(text, as: type)
        } catch {
            // Refusing is always allowed; the promise is only that it is a GVariantTextError, with an offset
            // inside the text (or just past its end).
            try require(
                error.offset >= 0 && error.offset <= text.utf8.count,
                "error offset \(error.offset) outside \(text.utf8.count) bytes of \(text.debugDescription)")
            return .refused
        }
        let shown = "\(text.debugDescription) (as \(type.map(\.signatureText) ?? "any type"))"
        do {
            try value.validate()
        } catch {
            throw FuzzFailure("parsed \(shown) into a value that fails validate(): \(error.message)")
        }
        if let type {
            try require(value.type == type, "parsed \(shown) into a value of type \(value.type)")
        }

        // Printed with annotations, the value reads back the same, with and without the type; printed without
        // them, it reads back the same when the type is given.
        let printed = GVariantText.format(value)
        try readsBack(value, from: printed, as: value.type, shown: "\(shown) printed as")
        try readsBack(value, from: printed, as: nil, shown: "\(shown) printed as")
        let plain = GVariantText.format(value, annotateTypes: false)
        try readsBack(value, from: plain, as: value.type, shown: "\(shown) printed plainly as")
        return .accepted
    }

    /// Text read from its bytes, as the broker reads a store's values (which need not be UTF-8), reads as the
    /// same bytes made a `String`.
    private static func checkBytes(_ bytes: [UInt8], of text: String, as type: DBusType) throws(FuzzFailure) {
        try requireSameReading(
            try? GVariantText.parse(text, as: type),
            bytes.withUnsafeBufferPointer { try? GVariantText.parse(utf8: $0, as: type) },
            of: "\(bytes)", "from its bytes")
    }

    /// White space around a value changes nothing, and the parser's shortcut for common stored forms (which
    /// a leading space turns off) reads them as the parser does.
    private static func checkShortcut(_ text: String, as type: DBusType?) throws(FuzzFailure) {
        try requireSameReading(
            try? GVariantText.parse(text, as: type), try? GVariantText.parse(" " + text, as: type),
            of: text.debugDescription, "after a space")
    }

    /// Two readings of one text both refuse it, or both give the same value bit for bit.
    private static func requireSameReading(
        _ first: DBusValue?, _ second: DBusValue?, of text: String, _ how: String
    ) throws(FuzzFailure) {
        switch (first, second) {
        case (nil, nil):
            return
        case (let first?, let second?):
            try require(identical(first, second), "\(text) reads as \(first), but as \(second) \(how)")
        default:
            throw FuzzFailure(
                "\(text) reads as \(String(describing: first)), but as \(String(describing: second)) \(how)")
        }
    }
}
