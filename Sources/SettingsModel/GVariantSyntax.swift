// SPDX-License-Identifier: Apache-2.0

import DBus

/// One value of GVariant text, parsed but not yet given a type: the first of the parser's two passes.
///
/// GLib's parser works the same way (`gvariant-parser.c`): it builds a tree, infers a type for it (or takes the
/// one it is given), then builds the value. Numbers stay as their token until the type says what they are, so
/// `5` becomes an `int32`, a `double` or a `uint64` as needed.
struct GVariantSyntax {
    indirect enum Kind {
        /// A number token, such as `5`, `-0x1f`, `1.5e3` or `inf`.
        case number(String)
        /// A quoted string, escapes already applied.
        case string(String)
        /// A `b'…'` byte string: its bytes up to the first NUL, then a NUL, as GLib stores it.
        case byteString([UInt8])
        /// `true` or `false`.
        case boolean(Bool)
        /// `[a, b, …]`.
        case array([GVariantSyntax])
        /// `(a, b, …)` with at least one field.
        case tuple([GVariantSyntax])
        /// `<value>`.
        case variant(GVariantSyntax)
        /// `{k: v, …}`, possibly empty.
        case dictionary(keys: [GVariantSyntax], values: [GVariantSyntax])
        /// `{k, v}`: one dictionary entry, which D-Bus allows only as an array element.
        case entry(key: GVariantSyntax, value: GVariantSyntax)
        /// `int64 5` or `@as []`: a value with its type written out.
        case annotated(DBusType, GVariantSyntax)
    }

    let kind: Kind
    /// The UTF-8 byte offset of the value's first token.
    let offset: Int

    /// What the value looks like, for messages: "a number", "a string", …
    var summary: String {
        switch kind {
        case .number(let token): return "the number \(token)"
        case .string: return "a string"
        case .byteString: return "a byte string"
        case .boolean: return "a boolean"
        case .array: return "an array"
        case .tuple(let fields): return "a tuple of \(fields.count) field\(fields.count == 1 ? "" : "s")"
        case .variant: return "a variant"
        case .dictionary: return "a dictionary"
        case .entry: return "a dictionary entry"
        case .annotated(let type, _): return "a value annotated as type '\(type)'"
        }
    }
}
