// SPDX-License-Identifier: Apache-2.0

public import DBus
public import Foundation
import SettingsModel

extension SettingRepresentations {
    /// A type with a D-Bus type of its own: `Bool` is `b`, `Int32` is `i`, `String` is `s`, and so on.
    public protocol NativeValue: SettingValue {
        /// The D-Bus type of every value.
        static var nativeDBusType: DBusType { get }
        /// The value as a D-Bus value of ``nativeDBusType``.
        var nativeDBusValue: DBusValue { get }
        /// Reads a D-Bus value; nil when it has another type or does not fit.
        init?(nativeDBusValue: DBusValue)
    }
}

extension SettingRepresentations.NativeValue {
    /// The native representation.
    public static var settingRepresentation: some SettingRepresentation<Self> { NativeRepresentation<Self>() }
}

/// The representation of a type with a D-Bus type of its own (``SettingRepresentations/NativeValue``).
struct NativeRepresentation<Value: SettingRepresentations.NativeValue>: SettingRepresentation {
    /// Makes the representation.
    public init() {}

    /// ``SettingRepresentations/NativeValue/nativeDBusType``.
    public var dbusType: DBusType? { Value.nativeDBusType }

    /// Encodes the value as its native D-Bus value.
    public func encode(_ value: Value) throws(SettingsError) -> DBusValue? { value.nativeDBusValue }

    /// Decodes a native D-Bus value.
    ///
    /// - Throws: `TypeMismatch` when the value has another type or does not fit (an `int64` of 300 read as
    ///   `UInt8`).
    public func decode(_ value: DBusValue) throws(SettingsError) -> Value {
        guard let decoded = Value(nativeDBusValue: value) else {
            throw .cannotDecode(value, as: Value.self, expected: Value.nativeDBusType)
        }
        return decoded
    }
}

// MARK: - Bool, String, floating point

extension Bool: SettingRepresentations.NativeValue {
    /// `b`.
    public static var nativeDBusType: DBusType { .boolean }
    /// The value as `b`.
    public var nativeDBusValue: DBusValue { .boolean(self) }
    /// Reads a `b`.
    public init?(nativeDBusValue value: DBusValue) {
        guard case .boolean(let bool) = value else { return nil }
        self = bool
    }
}

extension String: SettingRepresentations.NativeValue {
    /// `s`.
    public static var nativeDBusType: DBusType { .string }
    /// The value as `s`.
    public var nativeDBusValue: DBusValue { .string(self) }
    /// Reads an `s` (or an object path `o`, which is a string too).
    public init?(nativeDBusValue value: DBusValue) {
        switch value {
        case .string(let text): self = text
        case .objectPath(let path): self = path.rawValue
        default: return nil
        }
    }
}

extension Double: SettingRepresentations.NativeValue {
    /// `d`.
    public static var nativeDBusType: DBusType { .double }
    /// The value as `d`.
    public var nativeDBusValue: DBusValue { .double(self) }
    /// Reads a `d`.
    public init?(nativeDBusValue value: DBusValue) {
        guard case .double(let double) = value else { return nil }
        self = double
    }
}

extension Float: SettingRepresentations.NativeValue {
    /// `d` (D-Bus has no single-precision type).
    public static var nativeDBusType: DBusType { .double }
    /// The value as `d`.
    public var nativeDBusValue: DBusValue { .double(Double(self)) }
    /// Reads a `d`, rounded to the nearest `Float`.
    public init?(nativeDBusValue value: DBusValue) {
        guard case .double(let double) = value else { return nil }
        self = Float(double)
    }
}

// MARK: - Integers

extension SettingRepresentations {
    /// An integer type stored as a D-Bus integer type; reading accepts any D-Bus integer whose value fits.
    public protocol NativeInteger: NativeValue, FixedWidthInteger {}
}

extension SettingRepresentations.NativeInteger {
    /// Reads any D-Bus integer (`y n q i u x t`) whose value fits in this type.
    public init?(nativeDBusValue value: DBusValue) {
        switch value {
        case .byte(let number): self.init(exactly: number)
        case .int16(let number): self.init(exactly: number)
        case .uint16(let number): self.init(exactly: number)
        case .int32(let number): self.init(exactly: number)
        case .uint32(let number): self.init(exactly: number)
        case .int64(let number): self.init(exactly: number)
        case .uint64(let number): self.init(exactly: number)
        default: return nil
        }
    }
}

extension UInt8: SettingRepresentations.NativeInteger {
    /// `y`.
    public static var nativeDBusType: DBusType { .byte }
    /// The value as `y`.
    public var nativeDBusValue: DBusValue { .byte(self) }
}

extension Int8: SettingRepresentations.NativeInteger {
    /// `n` (D-Bus has no signed byte).
    public static var nativeDBusType: DBusType { .int16 }
    /// The value as `n`.
    public var nativeDBusValue: DBusValue { .int16(Int16(self)) }
}

extension Int16: SettingRepresentations.NativeInteger {
    /// `n`.
    public static var nativeDBusType: DBusType { .int16 }
    /// The value as `n`.
    public var nativeDBusValue: DBusValue { .int16(self) }
}

extension UInt16: SettingRepresentations.NativeInteger {
    /// `q`.
    public static var nativeDBusType: DBusType { .uint16 }
    /// The value as `q`.
    public var nativeDBusValue: DBusValue { .uint16(self) }
}

extension Int32: SettingRepresentations.NativeInteger {
    /// `i`.
    public static var nativeDBusType: DBusType { .int32 }
    /// The value as `i`.
    public var nativeDBusValue: DBusValue { .int32(self) }
}

extension UInt32: SettingRepresentations.NativeInteger {
    /// `u`.
    public static var nativeDBusType: DBusType { .uint32 }
    /// The value as `u`.
    public var nativeDBusValue: DBusValue { .uint32(self) }
}

extension Int64: SettingRepresentations.NativeInteger {
    /// `x`.
    public static var nativeDBusType: DBusType { .int64 }
    /// The value as `x`.
    public var nativeDBusValue: DBusValue { .int64(self) }
}

extension UInt64: SettingRepresentations.NativeInteger {
    /// `t`.
    public static var nativeDBusType: DBusType { .uint64 }
    /// The value as `t`.
    public var nativeDBusValue: DBusValue { .uint64(self) }
}

extension Int: SettingRepresentations.NativeInteger {
    /// `x`.
    public static var nativeDBusType: DBusType { .int64 }
    /// The value as `x`.
    public var nativeDBusValue: DBusValue { .int64(Int64(self)) }
}

extension UInt: SettingRepresentations.NativeInteger {
    /// `t`.
    public static var nativeDBusType: DBusType { .uint64 }
    /// The value as `t`.
    public var nativeDBusValue: DBusValue { .uint64(UInt64(self)) }
}

// MARK: - Bytes

extension Data: SettingRepresentations.NativeValue {
    /// `ay`.
    public static var nativeDBusType: DBusType { .array(.byte) }
    /// The value as `ay`.
    public var nativeDBusValue: DBusValue { .array(.byte, map { .byte($0) }) }
    /// Reads an `ay`.
    public init?(nativeDBusValue value: DBusValue) {
        guard case .array(.byte, let elements) = value else { return nil }
        var bytes = Data(capacity: elements.count)
        for element in elements {
            guard case .byte(let byte) = element else { return nil }
            bytes.append(byte)
        }
        self = bytes
    }
}
