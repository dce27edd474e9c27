// SPDX-License-Identifier: Apache-2.0

#if Configuration
import Configuration
import DBus
import SettingsBus
import SettingsModel

/// How a configuration key becomes a setting key (``SettingsBusProvider``).
enum KeyMapping {
    /// The key below `directory` whose segments are the components of `key`.
    static func settingKey(for key: AbsoluteConfigKey, in directory: SettingDirectory) throws(SettingsError)
        -> SettingPath
    {
        let name = key.components.joined(separator: ".")
        guard !key.components.isEmpty else {
            throw .invalidKey("the configuration key has no component, so it names no setting below \(directory)")
        }
        for component in key.components {
            if let problem = problem(in: component) {
                throw .invalidKey(
                    "the configuration key '\(name)' names no setting below \(directory): its component "
                        + "'\(component)' \(problem)")
            }
        }
        do {
            return try SettingPath(directory.rawValue + key.components.joined(separator: "/"))
        } catch {
            throw .invalidKey("the configuration key '\(name)' names no setting below \(directory): \(error.message)")
        }
    }

    /// Why a component is not a segment of a setting key, or `nil`.
    static func problem(in component: String) -> String? {
        if component.isEmpty { return "is empty" }
        for scalar in component.unicodeScalars {
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": continue
            default:
                return "has '\(scalar.escaped(asASCII: true))', and a setting key has only letters, digits, "
                    + "'.', '_' and '-' between its '/'"
            }
        }
        return nil
    }
}

/// How a D-Bus value becomes the configuration value a reader asks for (``SettingsBusProvider``).
enum ValueConversion {
    /// `value` as `type`.
    ///
    /// - Throws: `SettingsError.Code.typeMismatch` when the value is not of a type that converts to `type`.
    static func content(of value: DBusValue, as type: ConfigType, key: SettingPath) throws(SettingsError)
        -> ConfigContent
    {
        let value = unwrapped(value)
        if let content = convert(value, to: type) { return content }
        throw .typeMismatch(
            "the setting \(key) holds a value of type '\(value.type)', which does not convert to the "
                + "configuration type \(type.rawValue) (\(accepted(type)))")
    }

    /// The D-Bus types that convert to `type`, for an error's message.
    static func accepted(_ type: ConfigType) -> String {
        switch type {
        case .string: "from 's' or 'o'"
        case .int: "from an integer type, within Int"
        case .double: "from 'd' or an integer type"
        case .bool: "from 'b'"
        case .bytes: "from 'ay'"
        case .stringArray: "from 'as' or 'ao'"
        case .intArray: "from an array of an integer type"
        case .doubleArray: "from 'ad' or an array of an integer type"
        case .boolArray: "from 'ab'"
        case .byteChunkArray: "from 'aay'"
        }
    }

    static func convert(_ value: DBusValue, to type: ConfigType) -> ConfigContent? {
        switch type {
        case .string: string(value).map(ConfigContent.string)
        case .int: int(value).map(ConfigContent.int)
        case .double: double(value).map(ConfigContent.double)
        case .bool: bool(value).map(ConfigContent.bool)
        case .bytes: bytes(value).map(ConfigContent.bytes)
        case .stringArray: array(value, string).map(ConfigContent.stringArray)
        case .intArray: array(value, int).map(ConfigContent.intArray)
        case .doubleArray: array(value, double).map(ConfigContent.doubleArray)
        case .boolArray: array(value, bool).map(ConfigContent.boolArray)
        case .byteChunkArray: array(value, bytes).map(ConfigContent.byteChunkArray)
        }
    }

    static func unwrapped(_ value: DBusValue) -> DBusValue {
        var value = value
        while case .variant(let inner) = value { value = inner }
        return value
    }

    static func string(_ value: DBusValue) -> String? {
        switch value {
        case .string(let text): text
        case .objectPath(let path): path.rawValue
        default: nil
        }
    }

    static func int(_ value: DBusValue) -> Int? {
        switch value {
        case .byte(let number): Int(number)
        case .int16(let number): Int(number)
        case .uint16(let number): Int(number)
        case .int32(let number): Int(number)
        case .uint32(let number): Int(number)
        case .int64(let number): Int(exactly: number)
        case .uint64(let number): Int(exactly: number)
        default: nil
        }
    }

    static func double(_ value: DBusValue) -> Double? {
        if case .double(let number) = value { return number }
        return int(value).map(Double.init)
    }

    static func bool(_ value: DBusValue) -> Bool? {
        if case .boolean(let flag) = value { return flag }
        return nil
    }

    static func bytes(_ value: DBusValue) -> [UInt8]? {
        guard case .array(.byte, let elements) = value else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(elements.count)
        for case .byte(let byte) in elements { bytes.append(byte) }
        return bytes
    }

    /// The elements of an array, each converted by `element`; `nil` when the value is not an array or an
    /// element (or, for an empty array, its element type) does not convert.
    static func array<Element>(_ value: DBusValue, _ element: (DBusValue) -> Element?) -> [Element]? {
        guard case .array(let elementType, let elements) = value else { return nil }
        if elements.isEmpty {
            return elementType == .variant || element(DBusValue.placeholder(of: elementType)) != nil ? [] : nil
        }
        var result: [Element] = []
        result.reserveCapacity(elements.count)
        for value in elements {
            guard let converted = element(unwrapped(value)) else { return nil }
            result.append(converted)
        }
        return result
    }
}
#endif
