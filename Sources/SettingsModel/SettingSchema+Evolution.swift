// SPDX-License-Identifier: Apache-2.0

import DBus

extension SettingSchema {
    /// One field in which a new registration of a key differs from the registered schema.
    public struct Change: Sendable, Hashable, CustomStringConvertible {
        /// The field: `type`, `default`, `summary`, `description`, `range`, `choices`, `secret` or `machine-local`.
        public var field: String
        /// The registered value of the field, as people read it.
        public var old: String
        /// The new value of the field, as people read it.
        public var new: String
        /// Whether values valid under the registered schema stay valid, and nothing is lost or exposed.
        public var isCompatible: Bool
        /// Why the change is incompatible; nil for a compatible one.
        public var reason: String?

        /// The change for people: `choices 'a', 'b' → 'a'` and the reason, if any.
        public var description: String {
            "\(field) \(old) → \(new)" + (reason.map { " (\($0))" } ?? "")
        }
    }

    /// What changes from this schema to `new`, field by field; empty when they are the same.
    ///
    /// The rules, which the broker applies to every registration, from any client:
    ///
    /// | field | compatible | incompatible |
    /// | --- | --- | --- |
    /// | `summary`, `description` | any change | — |
    /// | `default` | any change, also one added or removed (the new schema checks it) | — |
    /// | `choices` | more choices, or none any more | a choice removed, choices where there were none |
    /// | `range` | a range that holds the old one, or none any more | a narrower or shifted range, a range where there was none |
    /// | `secret` | turned on | turned off (values would start to be broadcast) |
    /// | `machine-local` | turned on | turned off (values would start to leave the machine) |
    /// | `type` | — | any change (a field added to an `a{sv}` record keeps the type `a{sv}`) |
    ///
    /// A compatible change keeps every value the registered schema accepts valid.
    public func changes(to new: SettingSchema) -> [Change] {
        func show(_ value: DBusValue?) -> String { value.map { Self.show($0) } ?? "none" }
        func text(_ value: String?) -> String { value.map { "'\($0)'" } ?? "none" }
        var changes: [Change] = []
        if type != new.type {
            changes.append(
                Change(
                    field: "type", old: "'\(type)'", new: "'\(new.type)'", isCompatible: false,
                    reason: "stored values of the old type would no longer be served"))
        }
        if defaultValue != new.defaultValue {
            changes.append(Change(field: "default", old: show(defaultValue), new: show(new.defaultValue), isCompatible: true))
        }
        if summary != new.summary {
            changes.append(Change(field: "summary", old: text(summary), new: text(new.summary), isCompatible: true))
        }
        if description != new.description {
            changes.append(
                Change(field: "description", old: text(description), new: text(new.description), isCompatible: true))
        }
        if range != new.range {
            let widened: Bool
            switch (range, new.range) {
            case (_, nil): widened = true
            case (nil, _?): widened = false
            case (let old?, let wider?):
                widened =
                    (NumericComparison.compare(wider.min, old.min).map { $0 <= 0 } ?? false)
                    && (NumericComparison.compare(wider.max, old.max).map { $0 >= 0 } ?? false)
            }
            changes.append(
                Change(
                    field: "range", old: range.map { "\($0)" } ?? "none", new: new.range.map { "\($0)" } ?? "none",
                    isCompatible: widened, reason: widened ? nil : "values valid before would be refused"))
        }
        if choices != new.choices {
            let widened: Bool
            switch (choices, new.choices) {
            case (_, nil): widened = true
            case (nil, _?): widened = false
            case (let old?, let more?): widened = old.allSatisfy { more.contains($0) }
            }
            changes.append(
                Change(
                    field: "choices", old: choices.map { Self.show($0) } ?? "none",
                    new: new.choices.map { Self.show($0) } ?? "none", isCompatible: widened,
                    reason: widened ? nil : "values valid before would be refused"))
        }
        if isSecret != new.isSecret {
            changes.append(
                Change(
                    field: "secret", old: "\(isSecret)", new: "\(new.isSecret)", isCompatible: new.isSecret,
                    reason: new.isSecret ? nil : "a secret value would start to be broadcast"))
        }
        if isMachineLocal != new.isMachineLocal {
            changes.append(
                Change(
                    field: "machine-local", old: "\(isMachineLocal)", new: "\(new.isMachineLocal)",
                    isCompatible: new.isMachineLocal,
                    reason: new.isMachineLocal ? nil : "a machine-local value would start to leave the machine"))
        }
        return changes
    }

    /// Checks that registering `new` over this schema is a compatible change, unless `replacing` is true.
    ///
    /// - Returns: the changes (empty when the registration is identical).
    /// - Throws: ``SettingsError`` `SchemaConflict` naming each incompatible field, with its old and new value,
    ///   when one is incompatible and `replacing` is false.
    public func checkEvolution(
        to new: SettingSchema, for key: SettingPath, replacing: Bool = false
    ) throws(SettingsError) -> [Change] {
        let changes = changes(to: new)
        let incompatible = changes.filter { !$0.isCompatible }
        guard replacing || incompatible.isEmpty else {
            throw .schemaConflict(
                "\(key) is registered with another schema, and the new one changes "
                    + incompatible.map(\.description).joined(separator: "; ")
                    + ": register it with the option 'replace' (register(…, replacing: true) in Swift) to accept "
                    + "that; stored values the new schema refuses are then set aside, not lost")
        }
        return changes
    }
}
