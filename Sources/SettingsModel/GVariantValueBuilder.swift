// SPDX-License-Identifier: Apache-2.0

import DBus

/// The second pass of the parser: builds a `DBusValue` of a given type from a parsed value.
///
/// Mirrors the `get_value` functions of GLib's `gvariant-parser.c`. Where GLib is lax, this is strict: an
/// annotation must agree with the type asked for (GLib reads `int64 5` as a `uint32` when asked for `u`).
enum GVariantValueBuilder {
    /// Builds the value with the type inferred from the text itself.
    static func resolve(_ syntax: GVariantSyntax) throws(GVariantTextError) -> DBusValue {
        let type = try GVariantPattern.of(syntax).resolved(at: syntax.offset)
        return try value(of: syntax, as: type)
    }

    /// Builds the value as the given type.
    static func value(of syntax: GVariantSyntax, as type: DBusType) throws(GVariantTextError) -> DBusValue {
        switch syntax.kind {
        case .annotated(let declared, let inner):
            guard declared == type else { throw mismatch(syntax, type) }
            return try value(of: inner, as: type)

        case .number(let token):
            guard let number = try GVariantNumber.value(token, as: type, at: syntax.offset) else {
                throw mismatch(syntax, type)
            }
            return number

        case .boolean(let flag):
            guard type == .boolean else { throw mismatch(syntax, type) }
            return .boolean(flag)

        case .string(let text):
            switch type {
            case .string:
                return .string(text)
            case .objectPath:
                do { return .objectPath(try ObjectPath(text)) } catch {
                    throw GVariantTextError(.invalidValue, at: syntax.offset, "not a valid object path: \(error.message)")
                }
            case .signature:
                do { return .signature(try Signature(text)) } catch {
                    throw GVariantTextError(.invalidValue, at: syntax.offset, "not a valid signature: \(error.message)")
                }
            default:
                throw mismatch(syntax, type)
            }

        case .byteString(let bytes):
            guard type == .array(.byte) else { throw mismatch(syntax, type) }
            return .array(.byte, bytes.map(DBusValue.byte))

        case .variant(let inner):
            guard type == .variant else { throw mismatch(syntax, type) }
            return .variant(try resolve(inner))

        case .array(let elements):
            switch type {
            case .array(let elementType):
                var values: [DBusValue] = []
                values.reserveCapacity(elements.count)
                for element in elements { values.append(try value(of: element, as: elementType)) }
                return .array(elementType, values)
            case .dictionary(let keyType, let valueType):
                var entries: [DBusDictEntry] = []
                entries.reserveCapacity(elements.count)
                for element in elements {
                    guard case .entry(let key, let value) = element.kind else {
                        throw GVariantTextError(
                            .typeMismatch, at: element.offset,
                            "expected a dictionary entry {key, value} of type '{\(keyType)\(valueType)}' "
                                + "but found \(element.summary)")
                    }
                    entries.append(try entry(key, value, keyType, valueType))
                }
                return .dictionary(key: keyType, value: valueType, entries)
            default:
                throw mismatch(syntax, type)
            }

        case .dictionary(let keys, let values):
            guard case .dictionary(let keyType, let valueType) = type else { throw mismatch(syntax, type) }
            var entries: [DBusDictEntry] = []
            entries.reserveCapacity(keys.count)
            for (key, value) in zip(keys, values) { entries.append(try entry(key, value, keyType, valueType)) }
            return .dictionary(key: keyType, value: valueType, entries)

        case .tuple(let fields):
            guard case .structure(let fieldTypes) = type, fieldTypes.count == fields.count else {
                throw mismatch(syntax, type)
            }
            var values: [DBusValue] = []
            values.reserveCapacity(fields.count)
            for (field, fieldType) in zip(fields, fieldTypes) { values.append(try value(of: field, as: fieldType)) }
            return .structure(values)

        case .entry:
            throw GVariantTextError(
                .unsupported, at: syntax.offset,
                "a dictionary entry {key, value} may only be an element of an array; "
                    + "write a dictionary as {key: value, …}")
        }
    }

    private static func entry(
        _ key: GVariantSyntax, _ value: GVariantSyntax, _ keyType: DBusType, _ valueType: DBusType
    ) throws(GVariantTextError) -> DBusDictEntry {
        DBusDictEntry(key: try self.value(of: key, as: keyType), value: try self.value(of: value, as: valueType))
    }

    private static func mismatch(_ syntax: GVariantSyntax, _ type: DBusType) -> GVariantTextError {
        var hint = ""
        if type == .variant { hint = "; a variant is written <value>, as in <5> or <'text'>" }
        return GVariantTextError(
            .typeMismatch, at: syntax.offset, "expected a value of type '\(type)' but found \(syntax.summary)\(hint)")
    }
}
