// SPDX-License-Identifier: Apache-2.0

public import DBus

/// The GVariant text format: the way `dconf dump`, `dconf read`, `gsettings get` and `gdbus` write values.
///
/// The settings bus writes values in this format wherever they appear as text (the CLI, `SetFromString`,
/// dumps), so that a dconf dump loads as it is and a value printed here reads the same in GLib's tools.
///
/// ```swift
/// GVariantText.format(.array(.string, [.string("a"), .string("b")]))   // "['a', 'b']"
/// GVariantText.format(.uint32(7))                                      // "uint32 7"
/// try GVariantText.parse("@a{sv} {}")                                  // an empty a{sv}
/// try GVariantText.parse("5", as: .double)                             // .double(5)
/// ```
///
/// The printer is a transcription of GLib's `g_variant_print`; the parser accepts what GLib's `g_variant_parse`
/// accepts for the types D-Bus has, with these differences:
/// - Maybe values (`just`, `nothing`, `@mi`), the empty tuple `()`, handles and dictionary entries outside an
///   array are refused with an error naming the feature, since D-Bus cannot carry them.
/// - An annotation must agree with the type asked for: `int64 5` parsed as a `u` is an error (GLib converts it).
/// - Subnormal doubles such as `5e-324` are accepted (GLib refuses the numbers it prints).
/// - A dictionary's value type is inferred from all its values, so `{'a': 1, 'b': 1.5}` is an `a{sd}`
///   (GLib infers it from the first value only and refuses the text).
/// - A NUL character in the text is an error (GLib stops reading there).
/// - Values may nest at most 64 levels, and D-Bus's own limits (32 nested arrays, 32 nested structures) apply.
public enum GVariantText {
    /// Prints a value in GVariant text, exactly as GLib's `g_variant_print` does.
    ///
    /// With type annotations, the text parses back to the same value and type, in GLib and with
    /// ``parse(_:as:)``. Without them, numbers other than `int32` lose their types, as in `gsettings get`.
    ///
    /// ```swift
    /// GVariantText.format(.int64(5))                          // "int64 5"
    /// GVariantText.format(.int64(5), annotateTypes: false)    // "5"
    /// GVariantText.format(.variant(.int64(5)), annotateTypes: false)   // "<int64 5>"
    /// ```
    /// - Parameters:
    ///   - value: The value to print.
    ///   - annotateTypes: Whether to write the type annotations needed to read the value back as the same type
    ///     (`uint32 7`, `@as []`). Inside a variant, annotations are always written.
    /// - Returns: The text.
    public static func format(_ value: DBusValue, annotateTypes: Bool = true) -> String {
        var printer = GVariantPrinter()
        printer.print(value, annotate: annotateTypes)
        return printer.output
    }

    /// Parses a value from GVariant text.
    ///
    /// Without a type, the type comes from the text: `5` is an `int32`, `5.0` a `double`, `'x'` a `string`,
    /// `[1, int64 2]` an `ax`; an empty array or dictionary needs an annotation (`@as []`). With a type (the
    /// registered type of a key), the text is read as that type: `5` is a `double` for `d` and a `uint32` for
    /// `u`, and `[]` an empty array of the expected type.
    ///
    /// ```swift
    /// try GVariantText.parse("[1, 2]")                   // .array(.int32, [.int32(1), .int32(2)])
    /// try GVariantText.parse("5", as: .uint32)           // .uint32(5)
    /// try GVariantText.parse("'x'", as: .uint32)         // throws: expected a value of type 'u' but found a string
    /// ```
    /// - Parameters:
    ///   - text: The text of one value, with optional white space around it.
    ///   - type: The type the value must have, or `nil` to infer it.
    /// - Returns: A value that passes `DBusValue.validate()`.
    /// - Throws: ``GVariantTextError`` with the byte offset of the problem and a message saying what is wrong.
    ///   Any input whatsoever either parses or throws: nesting is bounded and the work is linear in the text.
    public static func parse(_ text: String, as type: DBusType? = nil) throws(GVariantTextError) -> DBusValue {
        let bytes = Array(text.utf8)
        if let nul = bytes.firstIndex(of: 0) {
            throw GVariantTextError(.syntax, at: nul, "the text contains a NUL character")
        }
        if let type, let value = bytes.withUnsafeBufferPointer({ simpleValue($0, as: type) }) { return value }
        var parser = GVariantSyntaxParser(bytes: bytes)
        let syntax = try parser.parseDocument()
        let value: DBusValue
        if let type {
            value = try GVariantValueBuilder.value(of: syntax, as: type)
        } else {
            value = try GVariantValueBuilder.resolve(syntax)
        }
        do {
            try value.validate()
        } catch {
            let code: GVariantTextError.Code = error.message.contains("deeper") ? .tooDeep : .invalidValue
            throw GVariantTextError(code, at: syntax.offset, "D-Bus cannot carry this value: \(error.message)")
        }
        return value
    }

    /// Parses a value from GVariant text given as its UTF-8 bytes, as a store holds it, the same way as
    /// ``parse(_:as:)`` parses `String(decoding: bytes, as: UTF8.self)`: the commonest stored forms are read
    /// straight from the bytes, with no `String` made of the whole text.
    package static func parse(
        utf8 bytes: UnsafeBufferPointer<UInt8>, as type: DBusType
    ) throws(GVariantTextError) -> DBusValue {
        if !bytes.contains(0), let value = simpleValue(bytes, as: type) { return value }
        return try parse(String(decoding: bytes, as: UTF8.self), as: type)
    }

    /// The bytes between the quotes of a string in its commonest stored form: single-quoted, without escapes
    /// or white space around it. The quotes are ASCII, so these are whole UTF-8 characters of the text.
    package static func plainStringContents(
        _ bytes: UnsafeBufferPointer<UInt8>
    ) -> Slice<UnsafeBufferPointer<UInt8>>? {
        let quote = UInt8(ascii: "'"), backslash = UInt8(ascii: "\\")
        guard bytes.count >= 2, bytes.first == quote, bytes.last == quote else { return nil }
        let inner = bytes.dropFirst().dropLast()
        guard !inner.contains(quote), !inner.contains(backslash) else { return nil }
        return inner
    }

    /// The commonest stored forms, read without the parser: a single-quoted string without escapes or
    /// surrounding white space, `true` and `false`, and a decimal `int32` without leading zeros. The broker
    /// reads every stored value at start-up, most of them of these forms; any other text (and any text of
    /// another type) goes through the parser, which reads these the same way (the gvariant-text fuzz check
    /// compares the two, by parsing each text also with a space in front, which this shortcut does not take).
    private static func simpleValue(_ bytes: UnsafeBufferPointer<UInt8>, as type: DBusType) -> DBusValue? {
        switch type {
        case .string:
            return plainStringContents(bytes).map { .string(String(decoding: $0, as: UTF8.self)) }
        case .boolean:
            if bytes.elementsEqual("true".utf8) { return .boolean(true) }
            if bytes.elementsEqual("false".utf8) { return .boolean(false) }
            return nil
        case .int32:
            let negative = bytes.first == UInt8(ascii: "-")
            let digits = bytes.dropFirst(negative ? 1 : 0)
            guard (1...10).contains(digits.count), digits.first != UInt8(ascii: "0") || digits.count == 1,
                digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            else { return nil }
            let magnitude = digits.reduce(Int64(0)) { $0 * 10 + Int64($1 - UInt8(ascii: "0")) }
            return Int32(exactly: negative ? -magnitude : magnitude).map(DBusValue.int32)
        default:
            return nil
        }
    }
}
