// SPDX-License-Identifier: Apache-2.0

import DBus

/// A partly known type: what the text of a value says about its type before any type is chosen.
///
/// This is GLib's "pattern" (`gvariant-parser.c`): `5` might be any number type, `'x'` a string, object path or
/// signature, `[]` an array of anything. The patterns of an array's elements are coalesced into the one type
/// that fits them all, so `[1, int64 2]` is an `ax` and `[1, 2.5]` an `ad`. What remains open at the end takes
/// GLib's defaults: a number is an `int32`, a string a `string`; an empty container stays ambiguous and needs
/// an annotation.
indirect enum GVariantPattern: Equatable {
    /// Anything at all: the element of an empty array.
    case any
    /// Any number type, `double` included.
    case number
    /// A string, object path or signature.
    case stringLike
    /// Exactly this basic type or `v`.
    case basic(DBusType)
    /// An array of elements of a pattern.
    case array(GVariantPattern)
    /// A dictionary entry; an array of entries is a dictionary.
    case entry(GVariantPattern, GVariantPattern)
    /// A tuple of at least one field.
    case tuple([GVariantPattern])

    /// The pattern that matches exactly one type.
    init(_ type: DBusType) {
        switch type {
        case .array(let element): self = .array(GVariantPattern(element))
        case .dictionary(let key, let value): self = .array(.entry(GVariantPattern(key), GVariantPattern(value)))
        case .structure(let fields): self = .tuple(fields.map(GVariantPattern.init))
        default: self = .basic(type)
        }
    }

    /// Returns the pattern of a parsed value.
    static func of(_ syntax: GVariantSyntax) throws(GVariantTextError) -> GVariantPattern {
        switch syntax.kind {
        case .number(let token):
            return GVariantNumber.isFloatingPoint(token) ? .basic(.double) : .number
        case .string:
            return .stringLike
        case .byteString:
            return .array(.basic(.byte))
        case .boolean:
            return .basic(.boolean)
        case .variant:
            return .basic(.variant)
        case .annotated(let type, _):
            return GVariantPattern(type)
        case .array(let elements):
            return .array(try coalesced(elements, what: "array element"))
        case .tuple(let fields):
            var patterns: [GVariantPattern] = []
            for field in fields { patterns.append(try of(field)) }
            return .tuple(patterns)
        case .dictionary(let keys, let values):
            guard !keys.isEmpty else { return .array(.entry(.any, .any)) }
            let key = try coalesced(keys, what: "dictionary key")
            try checkKey(key, at: syntax.offset)
            return .array(.entry(key, try coalesced(values, what: "dictionary value")))
        case .entry(let keySyntax, let valueSyntax):
            let key = try of(keySyntax)
            try checkKey(key, at: keySyntax.offset)
            return .entry(key, try of(valueSyntax))
        }
    }

    private static func coalesced(_ items: [GVariantSyntax], what: String) throws(GVariantTextError) -> GVariantPattern {
        var result = GVariantPattern.any
        for (index, item) in items.enumerated() {
            let pattern = try of(item)
            guard let merged = result.coalesced(with: pattern) else {
                throw GVariantTextError(
                    .typeMismatch, at: item.offset,
                    "unable to find a common type: \(what) \(index + 1) (\(item.summary)) does not have the type "
                        + "of the ones before it; all elements of an array share one type")
            }
            result = merged
        }
        return result
    }

    private static func checkKey(_ key: GVariantPattern, at offset: Int) throws(GVariantTextError) {
        switch key {
        case .number, .stringLike: return
        case .basic(let type) where type != .variant: return
        default:
            throw GVariantTextError(
                .typeMismatch, at: offset,
                "dictionary keys must have basic types (numbers, booleans, strings, object paths, signatures)")
        }
    }

    /// Returns the most specific pattern that both patterns allow, or `nil` when no type fits both.
    func coalesced(with other: GVariantPattern) -> GVariantPattern? {
        switch (self, other) {
        case (.any, _): return other
        case (_, .any): return self
        case (.number, .number), (.stringLike, .stringLike): return self
        case (.number, .basic(let type)) where Self.isNumeric(type): return other
        case (.basic(let type), .number) where Self.isNumeric(type): return self
        case (.stringLike, .basic(let type)) where Self.isStringLike(type): return other
        case (.basic(let type), .stringLike) where Self.isStringLike(type): return self
        case (.basic(let left), .basic(let right)): return left == right ? self : nil
        case (.array(let left), .array(let right)): return left.coalesced(with: right).map(GVariantPattern.array)
        case (.entry(let leftKey, let leftValue), .entry(let rightKey, let rightValue)):
            guard let key = leftKey.coalesced(with: rightKey), let value = leftValue.coalesced(with: rightValue) else {
                return nil
            }
            return .entry(key, value)
        case (.tuple(let left), .tuple(let right)):
            guard left.count == right.count else { return nil }
            var fields: [GVariantPattern] = []
            fields.reserveCapacity(left.count)
            for (leftField, rightField) in zip(left, right) {
                guard let field = leftField.coalesced(with: rightField) else { return nil }
                fields.append(field)
            }
            return .tuple(fields)
        default:
            return nil
        }
    }

    private static func isNumeric(_ type: DBusType) -> Bool {
        switch type {
        case .byte, .int16, .uint16, .int32, .uint32, .int64, .uint64, .double: return true
        default: return false
        }
    }

    private static func isStringLike(_ type: DBusType) -> Bool {
        type == .string || type == .objectPath || type == .signature
    }

    /// Chooses a complete type, with GLib's defaults: `int32` for numbers, `string` for strings.
    ///
    /// - Parameter offset: Where the value starts, for messages.
    /// - Throws: When an empty container leaves a type open, or a dictionary entry stands outside an array.
    func resolved(at offset: Int) throws(GVariantTextError) -> DBusType {
        switch self {
        case .any:
            throw GVariantTextError(
                .cannotInferType, at: offset,
                "cannot infer the element type of an empty array or dictionary; write the type, "
                    + "as in @as [] or @a{sv} {}")
        case .number: return .int32
        case .stringLike: return .string
        case .basic(let type): return type
        case .array(.entry(let key, let value)):
            return .dictionary(key: try key.resolved(at: offset), value: try value.resolved(at: offset))
        case .array(let element):
            return .array(try element.resolved(at: offset))
        case .entry:
            throw GVariantTextError(
                .unsupported, at: offset,
                "a dictionary entry {key, value} on its own has no D-Bus type; write a dictionary as "
                    + "{key: value, …} or put entries in an array")
        case .tuple(let fields):
            var types: [DBusType] = []
            for field in fields { types.append(try field.resolved(at: offset)) }
            return .structure(types)
        }
    }
}
