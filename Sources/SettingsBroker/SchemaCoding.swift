// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// Reads `Register` arguments into a ``SettingSchema`` and writes ``KeyDescription`` as the `Describe` reply.
enum SchemaCoding {
    /// The options `Register` understands.
    static let optionNames = ["summary", "description", "range", "min", "max", "choices", "secret", "replace"]

    static func schema(
        signature: DBusValue, defaultValue: DBusValue, options: [(String, DBusValue)], for key: SettingPath
    ) throws(SettingsError) -> SettingSchema {
        try registration(signature: signature, defaultValue: defaultValue, options: options, for: key).schema
    }

    /// The schema of a `Register` call, and whether it asks to replace an incompatible one (option `replace`).
    static func registration(
        signature: DBusValue, defaultValue: DBusValue, options: [(String, DBusValue)], for key: SettingPath
    ) throws(SettingsError) -> (schema: SettingSchema, replacing: Bool) {
        guard case .string(let text) = signature, case .variant(let value) = defaultValue else {
            throw .invalidValue("Register takes (s key, s signature, v default, a{sv} options)")
        }
        let type: DBusType
        do {
            type = try DBusType(parsing: text)
        } catch {
            throw .invalidValue("invalid signature '\(text)' for \(key): \(error.message)")
        }
        guard value.type == type else {
            throw .typeMismatch("the default for \(key) has type '\(value.type)', but the signature is '\(type)'")
        }
        var schema = SettingSchema(type: type, defaultValue: value)
        var minimum: DBusValue?, maximum: DBusValue?
        var replacing = false
        for (name, option) in options {
            switch (name, option) {
            case ("replace", .boolean(let replace)): replacing = replace
            case ("summary", .string(let summary)): schema.summary = summary
            case ("description", .string(let description)): schema.description = description
            case ("secret", .boolean(let secret)): schema.isSecret = secret
            case ("min", _): minimum = option
            case ("max", _): maximum = option
            case ("range", .structure(let bounds)) where bounds.count == 2:
                minimum = bounds[0]
                maximum = bounds[1]
            case ("choices", .array(_, let choices)): schema.choices = choices
            case _ where optionNames.contains(name):
                throw .invalidValue("option '\(name)' of \(key) has the wrong type '\(option.type)'")
            default:
                throw .invalidValue(
                    "unknown Register option '\(name)' for \(key); known: \(optionNames.joined(separator: ", "))")
            }
        }
        switch (minimum, maximum) {
        case (let min?, let max?): schema.range = SettingRange(min: min, max: max)
        case (nil, nil): break
        default: throw .invalidValue("a range for \(key) needs both min and max")
        }
        try schema.validate(for: key)
        return (schema, replacing)
    }

    static func describe(_ description: KeyDescription) -> DBusValue {
        var entries: [(String, DBusValue)] = [("writable", .boolean(description.writable))]
        let schema = description.schema
        entries.append(("registered", .boolean(schema != nil)))
        if let type = schema?.type ?? description.userValue?.type {
            entries.append(("signature", .string(type.signatureText)))
        }
        if let schema {
            entries.append(("default", schema.defaultValue))
            if let summary = schema.summary { entries.append(("summary", .string(summary))) }
            if let text = schema.description { entries.append(("description", .string(text))) }
            if let range = schema.range { entries.append(("range", .structure([range.min, range.max]))) }
            if let choices = schema.choices { entries.append(("choices", .array(schema.type, choices))) }
            entries.append(("secret", .boolean(schema.isSecret)))
        }
        if let user = description.userValue, schema?.isSecret != true {
            entries.append(("value", user))
        }
        if let schema, let user = description.userValue, let reason = schema.whyNotServed(user) {
            // The reason names the stored value, which a secret key's description never shows.
            let text =
                schema.isSecret
                ? "the stored value is not served under the registered schema: Get returns the default until it "
                    + "is set again" : reason
            entries.append(("value-ignored", .string(text)))
        }
        if let serial = description.lastChange { entries.append(("serial", .uint64(serial))) }
        return .dictionary(
            key: .string, value: .variant,
            entries.map { DBusDictEntry(key: .string($0.0), value: .variant($0.1)) })
    }
}
