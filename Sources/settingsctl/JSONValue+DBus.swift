// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

// MARK: - D-Bus values as JSON

extension JSONValue {
    /// Maps a D-Bus value onto JSON.
    ///
    /// | D-Bus | JSON |
    /// | --- | --- |
    /// | `b` | `true` / `false` |
    /// | `y` `n` `q` `i` `u` `x` `t` | a number, every digit kept (a reader may round beyond 2^53: use `text`) |
    /// | `d` | a number; NaN and the infinities as the strings `"nan"`, `"inf"`, `"-inf"` |
    /// | `s` `o` `g` | a string |
    /// | `v` | the value it holds |
    /// | arrays (`ay` included) and structures | an array |
    /// | dictionaries | an object; keys that are not strings are written as text (`"1"`, `"true"`) |
    init(_ value: DBusValue) {
        switch value {
        case .boolean(let flag): self = .bool(flag)
        case .byte(let number): self = .uint(UInt64(number))
        case .int16(let number): self = .int(Int64(number))
        case .uint16(let number): self = .uint(UInt64(number))
        case .int32(let number): self = .int(Int64(number))
        case .uint32(let number): self = .uint(UInt64(number))
        case .int64(let number): self = .int(number)
        case .uint64(let number): self = .uint(number)
        case .double(let number): self = .double(number)
        case .string(let text): self = .string(text)
        case .objectPath(let path): self = .string(path.rawValue)
        case .signature(let signature): self = .string(signature.text)
        case .variant(let inner): self = JSONValue(inner)
        case .array(_, let elements): self = .array(elements.map(JSONValue.init))
        case .structure(let fields): self = .array(fields.map(JSONValue.init))
        case .dictionary(_, _, let entries):
            self = .object(entries.map { (Self.keyText($0.key), JSONValue($0.value)) })
        }
    }

    /// A value with its type and its GVariant text: `{"type": "u", "value": 8, "text": "uint32 8"}`.
    static func record(_ value: DBusValue) -> JSONValue {
        .object([
            ("type", .string(value.type.signatureText)), ("value", JSONValue(value)),
            ("text", .string(GVariantText.format(value))),
        ])
    }

    /// The text of a dictionary key.
    private static func keyText(_ key: DBusValue) -> String {
        switch key {
        case .string(let text): return text
        case .objectPath(let path): return path.rawValue
        case .signature(let signature): return signature.text
        case .boolean(let flag): return flag ? "true" : "false"
        default: return JSONValue(key).text
        }
    }
}
