// SPDX-License-Identifier: Apache-2.0

internal import CDBus
internal import Glibc

/// Reads the arguments of a received message from its bytes in the D-Bus wire format, instead of through
/// libdbus's message iterator, which re-reads the signature at every step and costs several times as much.
///
/// libdbus validated the message when it arrived (types, lengths, alignment, UTF-8, nesting), so this reader
/// trusts nothing about the bytes but their validity: every read is bounds-checked and any surprise throws,
/// after which the caller reads the message with the iterator instead (``MessageCoding/decode(_:strings:)``).
/// Both readers give the same values: the test suite and the dbus-value fuzz check compare them.
struct WireBody {
    /// Why the wire reader gave up; the iterator then reads the message.
    struct Unreadable: Error {}

    private let base: UnsafePointer<UInt8>
    private let end: Int
    private var offset: Int
    private let bigEndian: Bool
    private let signatures: CStringCache<[DBusType]>

    /// Reads the body of `pointer` (whose body's signature is `signature`, its complete types `types`).
    static func read(
        _ pointer: OpaquePointer, types: [DBusType], signatures: CStringCache<[DBusType]>
    ) throws(Unreadable) -> [DBusValue] {
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        guard dbus_message_marshal(pointer, &bytes, &length) != 0, let bytes else { throw Unreadable() }
        defer { dbus_free(bytes) }
        return try bytes.withMemoryRebound(to: UInt8.self, capacity: Int(length)) { message throws(Unreadable) in
            let count = Int(length)
            guard count >= 16 else { throw Unreadable() }
            let bigEndian: Bool
            switch message[0] {
            case UInt8(ascii: "l"): bigEndian = false
            case UInt8(ascii: "B"): bigEndian = true
            default: throw Unreadable()
            }
            // The fixed header: byte order, type, flags, version, body length, serial, header fields' length.
            var header = WireBody(base: message, end: count, offset: 4, bigEndian: bigEndian, signatures: signatures)
            let bodyLength = Int(try header.uint32())
            header.offset = 12
            let fieldsLength = Int(try header.uint32())
            let bodyStart = (16 + fieldsLength + 7) & ~7
            guard bodyStart <= count, count - bodyStart == bodyLength else { throw Unreadable() }
            // Alignment counts from the start of the message; the body starts 8-aligned, as the header ends.
            var body = WireBody(
                base: message, end: count, offset: bodyStart, bigEndian: bigEndian, signatures: signatures)
            var values: [DBusValue] = []
            values.reserveCapacity(types.count)
            for type in types { values.append(try body.value(of: type, depth: 0)) }
            guard body.offset == count else { throw Unreadable() }
            return values
        }
    }

    private init(
        base: UnsafePointer<UInt8>, end: Int, offset: Int, bigEndian: Bool, signatures: CStringCache<[DBusType]>
    ) {
        self.base = base
        self.end = end
        self.offset = offset
        self.bigEndian = bigEndian
        self.signatures = signatures
    }

    // MARK: - Fixed-size values

    private mutating func align(_ boundary: Int) throws(Unreadable) {
        let aligned = (offset + boundary - 1) & ~(boundary - 1)
        guard aligned <= end else { throw Unreadable() }
        offset = aligned
    }

    /// An integer of `T`'s size, aligned to it, in the message's byte order.
    private mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(Unreadable) -> T {
        let size = MemoryLayout<T>.size
        try align(size)
        guard end - offset >= size else { throw Unreadable() }
        let raw = UnsafeRawPointer(base + offset).loadUnaligned(as: T.self)
        offset += size
        return bigEndian ? T(bigEndian: raw) : T(littleEndian: raw)
    }

    private mutating func byte() throws(Unreadable) -> UInt8 {
        guard offset < end else { throw Unreadable() }
        defer { offset += 1 }
        return base[offset]
    }

    private mutating func uint32() throws(Unreadable) -> UInt32 { try integer(UInt32.self) }

    // MARK: - Strings

    /// `count` bytes of text and the NUL after them.
    private mutating func text(count: Int) throws(Unreadable) -> UnsafeBufferPointer<UInt8> {
        guard count >= 0, end - offset > count, base[offset + count] == 0 else { throw Unreadable() }
        defer { offset += count + 1 }
        return UnsafeBufferPointer(start: base + offset, count: count)
    }

    private mutating func string() throws(Unreadable) -> String {
        let count = Int(try uint32())
        return String(decoding: try text(count: count), as: UTF8.self)
    }

    /// A signature value's text: one byte of length, the text, a NUL.
    private mutating func signatureText() throws(Unreadable) -> UnsafeBufferPointer<UInt8> {
        try text(count: Int(try byte()))
    }

    /// The one complete type a variant's signature names.
    private mutating func variantType() throws(Unreadable) -> DBusType {
        let text = try signatureText()
        if text.count == 1, let basic = DBusType(basicCode: text[0]) { return basic }
        let types = try text.withMemoryRebound(to: CChar.self) { characters throws(Unreadable) in
            try signatures.value(for: characters.baseAddress!) { characters throws(Unreadable) in
                guard let signature = try? Signature(String(cString: characters)) else { throw Unreadable() }
                return signature.types
            }
        }
        guard types.count == 1 else { throw Unreadable() }
        return types[0]
    }

    // MARK: - Values

    private static let maximumDepth = 64

    private mutating func value(of type: DBusType, depth: Int) throws(Unreadable) -> DBusValue {
        guard depth <= WireBody.maximumDepth else { throw Unreadable() }
        switch type {
        case .byte: return .byte(try byte())
        case .boolean:
            let value = try uint32()
            guard value <= 1 else { throw Unreadable() }
            return .boolean(value == 1)
        case .int16: return .int16(try integer(Int16.self))
        case .uint16: return .uint16(try integer(UInt16.self))
        case .int32: return .int32(try integer(Int32.self))
        case .uint32: return .uint32(try integer(UInt32.self))
        case .int64: return .int64(try integer(Int64.self))
        case .uint64: return .uint64(try integer(UInt64.self))
        case .double: return .double(Double(bitPattern: try integer(UInt64.self)))
        case .string: return .string(try string())
        case .objectPath: return .objectPath(ObjectPath(trusted: try string()))
        case .signature:
            let text = String(decoding: try signatureText(), as: UTF8.self)
            guard let signature = try? Signature(text) else { throw Unreadable() }
            return .signature(signature)
        case .variant:
            let inner = try variantType()
            return .variant(try value(of: inner, depth: depth + 1))
        case .structure(let fields):
            try align(8)
            var values: [DBusValue] = []
            values.reserveCapacity(fields.count)
            for field in fields { values.append(try value(of: field, depth: depth + 1)) }
            return .structure(values)
        case .array(let element):
            let length = Int(try uint32())
            try align(element.wireAlignment)
            let stop = offset + length
            guard length >= 0, stop <= end else { throw Unreadable() }
            if element == .byte {
                let bytes = UnsafeBufferPointer(start: base + offset, count: length)
                offset = stop
                return .array(.byte, bytes.map(DBusValue.byte))
            }
            var elements: [DBusValue] = []
            while offset < stop { elements.append(try value(of: element, depth: depth + 1)) }
            guard offset == stop else { throw Unreadable() }
            return .array(element, elements)
        case .dictionary(let key, let valueType):
            let length = Int(try uint32())
            try align(8)
            let stop = offset + length
            guard length >= 0, stop <= end else { throw Unreadable() }
            var entries: [DBusDictEntry] = []
            while offset < stop {
                try align(8)
                let entryKey = try value(of: key, depth: depth + 2)
                let entryValue = try value(of: valueType, depth: depth + 2)
                entries.append(DBusDictEntry(key: entryKey, value: entryValue))
            }
            guard offset == stop else { throw Unreadable() }
            return .dictionary(key: key, value: valueType, entries)
        }
    }
}

extension DBusType {
    /// The boundary a value of this type starts on in the wire format.
    var wireAlignment: Int {
        switch self {
        case .byte, .signature, .variant: return 1
        case .int16, .uint16: return 2
        case .boolean, .int32, .uint32, .string, .objectPath, .array, .dictionary: return 4
        case .int64, .uint64, .double, .structure: return 8
        }
    }
}
