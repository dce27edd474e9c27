// SPDX-License-Identifier: Apache-2.0

public import DBus

extension SettingSchema {
    /// Checks a value about to be written to a key with this schema: its type, range and choices.
    ///
    /// Limits that hold for every key (nesting, size) are checked by
    /// `DBusValue.validateForStorage(at:)`.
    ///
    /// - Parameters:
    ///   - value: The value to write.
    ///   - key: The key, named in messages.
    /// - Throws: ``SettingsError`` with code ``SettingsError/Code/typeMismatch`` when the value's type is not the
    ///   schema's, or ``SettingsError/Code/outOfRange`` when it lies outside the range or is not one of the
    ///   choices.
    public func validate(_ value: DBusValue, for key: SettingPath) throws(SettingsError) {
        try check(value, for: key)
    }

    /// Whether a stored value is served under this schema: it has the schema's type and lies within its
    /// range and choices. A value the schema refuses (stored before the key was registered, or before a
    /// schema replaced another) is kept but not served: the key reads its default.
    public func accepts(_ value: DBusValue) -> Bool {
        guard value.type == type else { return false }
        if let range, !range.contains(value) { return false }
        return isAmongChoices(value)
    }

    /// The type of each choice: the schema's type, or its element type for a set of flags.
    public var choiceType: DBusType {
        if case .array(let element) = type, let first = choices?.first, first.type == element { return element }
        return type
    }

    /// Whether a value of the schema's type is among its choices (true without choices): one of them, or, for
    /// choices of the element type (a set of flags), an array whose every element is one of them.
    private func isAmongChoices(_ value: DBusValue) -> Bool {
        guard let choices else { return true }
        if choiceType != type, case .array(_, let elements) = value { return elements.allSatisfy(choices.contains) }
        return choices.contains(value)
    }

    /// Why a stored value is not served under this schema, for people; nil when it is.
    public func whyNotServed(_ value: DBusValue) -> String? {
        guard !accepts(value) else { return nil }
        let reason: String
        do throws(SettingsError) {
            try check(value, for: nil)
            return nil
        } catch {
            reason = error.message
        }
        return "the stored value is not served under the registered schema (\(reason)): Get returns the default "
            + "until it is set again"
    }

    private func check(_ value: DBusValue, for key: SettingPath?) throws(SettingsError) {
        let suffix = key.map { " for \($0)" } ?? ""
        guard value.type == type else {
            throw .typeMismatch(
                "a value of type '\(value.type)' cannot be stored in \(key.map { "\($0)," } ?? "a key") "
                    + "whose type is '\(type)'")
        }
        if let range, !range.contains(value) {
            throw .outOfRange("value \(Self.show(value)) is out of range \(range)\(suffix)")
        }
        if let choices, !isAmongChoices(value) {
            if choiceType != type, case .array(_, let elements) = value {
                let stray = elements.first { !choices.contains($0) }.map(Self.show) ?? ""
                throw .outOfRange(
                    "value \(Self.show(value)) holds \(stray), which is not one of the choices \(Self.show(choices))\(suffix)")
            }
            throw .outOfRange("value \(Self.show(value)) is not one of the choices \(Self.show(choices))\(suffix)")
        }
    }

    /// Checks that the schema itself is sound: a valid type, a default of that type that passes the schema's
    /// own checks, a range only on a numeric type with bounds of that type in order, and choices of that type.
    ///
    /// - Parameter key: The key the schema is for, named in messages if given.
    /// - Throws: ``SettingsError`` with code ``SettingsError/Code/invalidValue`` saying what is wrong, or
    ///   ``SettingsError/Code/tooLarge`` when its values exceed the limits of stored values.
    public func validate(for key: SettingPath? = nil) throws(SettingsError) {
        let subject = key.map { "schema for \($0)" } ?? "schema"
        func invalid(_ problem: String) -> SettingsError { .invalidValue("invalid \(subject): \(problem)") }

        do { _ = try Signature(type.signatureText) } catch {
            throw invalid("its type is not a valid D-Bus type: \(error.message)")
        }
        if let defaultValue {
            guard defaultValue.type == type else {
                throw invalid(
                    "the default value \(Self.show(defaultValue)) has type '\(defaultValue.type)', not the schema's "
                        + "type '\(type)'")
            }
            do { try defaultValue.validate() } catch {
                throw invalid("the default value is not a valid D-Bus value: \(error.message)")
            }
        }
        try checkLimits(subject)
        if let range {
            guard NumericComparison.isNumeric(type) else {
                throw invalid("a range is only allowed on numeric types (y n q i u x t d), not on '\(type)'")
            }
            for (name, bound) in [("minimum", range.min), ("maximum", range.max)] where bound.type != type {
                throw invalid(
                    "the range \(name) \(Self.show(bound)) has type '\(bound.type)', not the schema's type '\(type)'")
            }
            guard let order = NumericComparison.compare(range.min, range.max), order <= 0 else {
                throw invalid("the range minimum \(Self.show(range.min)) is not at most the maximum \(Self.show(range.max))")
            }
        }
        if let choices {
            guard !choices.isEmpty else { throw invalid("the list of choices is empty") }
            // Choices of an array's element type are what each element may be (a set of flags).
            for choice in choices where choice.type != choiceType {
                throw invalid("the choice \(Self.show(choice)) has type '\(choice.type)', not the schema's type '\(type)'")
            }
        }
        do {
            if let defaultValue { try check(defaultValue, for: nil) }
        } catch {
            throw invalid("the default value does not pass the schema's checks: \(error.message)")
        }
    }

    /// Checks that the schema's values obey the limits of stored values: the default nests at most
    /// ``SettingsBusNames/maximumValueDepth`` levels, each choice one level less (`Describe` sends the choices
    /// inside an array), and default, choices and range together take at most
    /// ``SettingsBusNames/maximumSchemaSize`` bytes.
    private func checkLimits(_ subject: String) throws(SettingsError) {
        let maximumDepth = SettingsBusNames.maximumValueDepth
        let depth = defaultValue?.nestingDepth ?? 0
        guard depth <= maximumDepth else {
            throw .tooLarge(
                "\(subject): the default value nests containers \(depth) levels deep; a default, like any stored "
                    + "value, nests at most \(maximumDepth) levels")
        }
        var size = defaultValue?.approximateSize ?? 0
        for choice in choices ?? [] {
            let depth = choice.nestingDepth
            guard depth < maximumDepth else {
                throw .tooLarge(
                    "\(subject): the choice \(Self.show(choice)) nests containers \(depth) levels deep; a choice "
                        + "nests at most \(maximumDepth - 1) levels")
            }
            size += choice.approximateSize
        }
        if let range { size += range.min.approximateSize + range.max.approximateSize }
        guard size <= SettingsBusNames.maximumSchemaSize else {
            throw .tooLarge(
                "\(subject): its default\(choices == nil ? "" : " and choices") take about \(size) bytes; a schema's "
                    + "values take at most \(SettingsBusNames.maximumSchemaSize) bytes (1 MiB), like one stored value")
        }
    }

    /// A value in GVariant text without annotations, cut short when long.
    static func show(_ value: DBusValue) -> String {
        let text = GVariantText.format(value, annotateTypes: false)
        return text.count > 80 ? String(text.prefix(80)) + "…" : text
    }

    static func show(_ values: [DBusValue]) -> String {
        let shown = values.prefix(10).map(show).joined(separator: ", ")
        return values.count > 10 ? shown + ", … (\(values.count) in all)" : shown
    }
}
