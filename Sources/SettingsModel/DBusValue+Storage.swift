// SPDX-License-Identifier: Apache-2.0

public import DBus

extension DBusValue {
    /// An upper bound of the value's size in the D-Bus wire format, in bytes, computed in one cheap pass.
    ///
    /// Each part is counted at its marshalled size plus the most alignment padding it can need, so the real
    /// marshalled size, wherever the value sits in a message, is never larger. The measure is monotone: adding
    /// an element or lengthening a string never makes it smaller. The broker compares it with
    /// ``SettingsBusNames/maximumValueSize``.
    public var approximateSize: Int {
        switch self {
        case .byte: return 1
        case .int16, .uint16: return 3
        case .boolean, .int32, .uint32: return 7
        case .int64, .uint64, .double: return 15
        case .string(let text): return 7 + text.utf8.count + 1
        case .objectPath(let path): return 7 + path.rawValue.utf8.count + 1
        case .signature(let signature): return 1 + signature.text.utf8.count + 1
        case .variant(let inner): return 1 + inner.type.signatureText.utf8.count + 1 + inner.approximateSize
        case .array(_, let elements):
            return elements.reduce(7 + 7) { $0 + $1.approximateSize }
        case .dictionary(_, _, let entries):
            return entries.reduce(7 + 7) { $0 + 7 + $1.key.approximateSize + $1.value.approximateSize }
        case .structure(let fields):
            return fields.reduce(7) { $0 + $1.approximateSize }
        }
    }

    /// Checks that the broker may store the value under a key: it is a valid D-Bus value, nests at most
    /// ``SettingsBusNames/maximumValueDepth`` levels and is at most ``SettingsBusNames/maximumValueSize`` bytes.
    ///
    /// These checks do not depend on the key's schema; ``SettingSchema/validate(_:for:)`` adds those that do.
    ///
    /// - Parameter key: The key, named in messages.
    /// - Throws: ``SettingsError`` with code ``SettingsError/Code/invalidValue`` for a value D-Bus cannot
    ///   carry, or ``SettingsError/Code/tooLarge`` for one nested too deep or too large.
    public func validateForStorage(at key: SettingPath) throws(SettingsError) {
        do {
            try validate()
        } catch {
            throw .invalidValue("invalid value for \(key): \(error.message)")
        }
        let depth = nestingDepth
        guard depth <= SettingsBusNames.maximumValueDepth else {
            throw .tooLarge(
                "value for \(key) nests containers \(depth) levels deep; the settings bus stores values nested "
                    + "at most \(SettingsBusNames.maximumValueDepth) levels, so that it can send them back in its "
                    + "replies and signals")
        }
        let size = approximateSize
        guard size <= SettingsBusNames.maximumValueSize else {
            throw .tooLarge(
                "value for \(key) takes about \(size) bytes; the settings bus stores values of at most "
                    + "\(SettingsBusNames.maximumValueSize) bytes (1 MiB)")
        }
    }
}
