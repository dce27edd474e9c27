// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// A value of a dconf dump read as the broker stores it, with the type its key is registered with.
///
/// Most GVariant text is D-Bus text and reads as it is. GSettings's maybe types (`mT`) are the exception: D-Bus
/// has none, and the GIO module `settingsbus` stores a maybe as an array `aT` of no element (`nothing`) or of
/// one (`just` the value); so does this reader, for the forms `dconf dump` prints (`@ms nothing`, `@ms 'x'`,
/// `@mmb just true` is a maybe of a maybe, which has no form) and the bare `nothing` and `just 'x'` of a key
/// registered as an array.
enum DconfValue {
    /// Why a text cannot be read as a value of the type asked for.
    struct Problem: Error, Sendable, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads one value.
    ///
    /// - Parameters:
    ///   - text: GVariant text, as a dconf dump gives it.
    ///   - type: the type the key is registered with, or nil to take the type the text has (as `dconf load`).
    /// - Throws: ``Problem`` saying why the text is not a value of `type`, or of any type D-Bus has.
    static func parse(_ text: String, as type: DBusType?) throws(Problem) -> DBusValue {
        let text = text.trimmingPrefix(while: \.isWhitespace)
        if text.hasPrefix("@m") {
            let annotation = text.prefix { !$0.isWhitespace }
            let elementText = String(annotation.dropFirst(2))
            guard !elementText.hasPrefix("m") else {
                throw Problem("a maybe of a maybe ('\(annotation)') has no form in D-Bus")
            }
            let element: DBusType
            do { element = try DBusType(parsing: elementText) } catch {
                throw Problem("'\(annotation)' is not a maybe of a D-Bus type: \(error.message)")
            }
            if let type, type != .array(element) {
                throw Problem("a value of type 'm\(element)' (stored as 'a\(element)') is not of the registered type '\(type)'")
            }
            return try maybe(String(text.dropFirst(annotation.count)), of: element)
        }
        if isKeyword("nothing", at: text) || isKeyword("just", at: text) {
            guard case .array(let element)? = type else {
                throw Problem(
                    "'\(text.prefix(while: { !$0.isWhitespace }))' is a maybe value, which needs its type ('@ms nothing') "
                        + "or a key registered as an array")
            }
            return try maybe(String(text), of: element)
        }
        do {
            return try GVariantText.parse(String(text), as: type)
        } catch {
            throw Problem(type.map { "not a value of the registered type '\($0)': \(error)" } ?? "not GVariant text: \(error)")
        }
    }

    /// A maybe's text after its annotation (`nothing`, `just v` or `v`) as an array of no element or one.
    private static func maybe(_ text: String, of element: DBusType) throws(Problem) -> DBusValue {
        var rest = Substring(text).trimmingPrefix(while: \.isWhitespace)
        if isKeyword("nothing", at: rest), rest.dropFirst("nothing".count).allSatisfy(\.isWhitespace) {
            return .array(element, [])
        }
        if isKeyword("just", at: rest) { rest = rest.dropFirst("just".count) }
        do {
            return .array(element, [try GVariantText.parse(String(rest), as: element)])
        } catch {
            throw Problem("not a maybe of type 'm\(element)': \(error)")
        }
    }

    /// Whether `text` starts with the word `word`, not followed by a letter, digit or `_`.
    private static func isKeyword(_ word: String, at text: Substring) -> Bool {
        guard text.hasPrefix(word) else { return false }
        guard let next = text.dropFirst(word.count).first else { return true }
        return !(next.isLetter || next.isNumber || next == "_")
    }
}
