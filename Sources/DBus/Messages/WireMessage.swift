// SPDX-License-Identifier: Apache-2.0

internal import CDBus
internal import Glibc

/// Reads a received message from its bytes in the D-Bus wire format, instead of through libdbus's accessors
/// and message iterator, which re-reads the signature at every step and costs several times as much.
///
/// libdbus validated the message when it arrived (types, lengths, alignment, UTF-8, nesting, header fields),
/// so this reader trusts nothing about the bytes but their validity: every read is bounds-checked and any
/// surprise throws, after which the caller reads the message through libdbus instead
/// (``MessageCoding/decode(_:strings:signatures:)``). Both readers give the same messages: the test suite
/// (`WireMessageTests.randomBodiesAreReadByTheFastReaderAsTheLibdbusReaderReadsThem`) and the dbus-value fuzz
/// check compare them; why both are kept is said at ``MessageCoding``.
struct WireMessage {
    /// Why the wire reader gave up; libdbus's accessors then read the message.
    struct Unreadable: Error {}

    private let base: UnsafePointer<UInt8>
    private let end: Int
    private var offset: Int
    private let bigEndian: Bool
    private let signatures: CStringCache<[DBusType]>

    /// Reads the message `pointer` from its marshalled bytes, sharing header strings through `strings` and
    /// the types of signatures through `signatures`.
    static func read(
        _ pointer: OpaquePointer, strings: HeaderStrings, signatures: CStringCache<[DBusType]>
    ) throws(Unreadable) -> DBusMessage {
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        guard dbus_message_marshal(pointer, &bytes, &length) != 0, let bytes else { throw Unreadable() }
        defer { dbus_free(bytes) }
        return try bytes.withMemoryRebound(to: UInt8.self, capacity: Int(length)) { message throws(Unreadable) in
            try read(message, count: Int(length), strings: strings, signatures: signatures)
        }
    }

    private static func read(
        _ message: UnsafePointer<UInt8>, count: Int, strings: HeaderStrings, signatures: CStringCache<[DBusType]>
    ) throws(Unreadable) -> DBusMessage {
        guard count >= 16 else { throw Unreadable() }
        let bigEndian: Bool
        switch message[0] {
        case UInt8(ascii: "l"): bigEndian = false
        case UInt8(ascii: "B"): bigEndian = true
        default: throw Unreadable()
        }
        let kind: DBusMessage.Kind
        switch message[1] {
        case 1: kind = .methodCall
        case 2: kind = .methodReturn
        case 3: kind = .error
        case 4: kind = .signal
        default: throw Unreadable()
        }
        let flags = message[2]
        var result = DBusMessage(kind: kind)
        result.noReplyExpected = flags & 0x1 != 0
        result.autoStart = flags & 0x2 == 0
        // The fixed header: byte order, type, flags, version, body length, serial, then the header fields,
        // an array of (code, variant), whose length comes first.
        var reader = WireMessage(base: message, end: count, offset: 4, bigEndian: bigEndian, signatures: signatures)
        let bodyLength = Int(try reader.uint32())
        result.serial = try reader.uint32()
        let fieldsLength = Int(try reader.uint32())
        let fieldsEnd = 16 + fieldsLength
        let bodyStart = (fieldsEnd + 7) & ~7
        guard bodyStart <= count, count - bodyStart == bodyLength else { throw Unreadable() }
        var signature: UnsafePointer<CChar>?
        while reader.offset < fieldsEnd {
            try reader.align(8)
            let code = try reader.byte()
            let type = try reader.signatureText()
            switch (code, type.count == 1 ? type[0] : 0) {
            case (1, UInt8(ascii: "o")): result.path = ObjectPath(trusted: try reader.headerString(strings))
            case (2, UInt8(ascii: "s")): result.interface = InterfaceName(trusted: try reader.headerString(strings))
            case (3, UInt8(ascii: "s")): result.member = MemberName(trusted: try reader.headerString(strings))
            case (4, UInt8(ascii: "s")): result.errorName = DBusError.Name(rawValue: try reader.headerString(strings))
            case (5, UInt8(ascii: "u")):
                let replySerial = try reader.uint32()
                result.replySerial = replySerial == 0 ? nil : replySerial
            case (6, UInt8(ascii: "s")): result.destination = BusName(trusted: try reader.headerString(strings))
            case (7, UInt8(ascii: "s")): result.sender = BusName(trusted: try reader.headerString(strings))
            case (8, UInt8(ascii: "g")):
                signature = try reader.signatureText().withMemoryRebound(to: CChar.self) { $0.baseAddress }
            case (9, UInt8(ascii: "u")):
                // The count of unix fds: the arguments that carry them (`h`) are not read here (see below).
                _ = try reader.uint32()
            case (1...9, _):
                // A known field of another type: libdbus refuses such a message; read it through libdbus anyway.
                throw Unreadable()
            default:
                // A field the specification does not define: ignored, as the specification says and libdbus does.
                _ = try reader.value(of: try reader.singleType(type), depth: 1)
            }
        }
        guard reader.offset == fieldsEnd else { throw Unreadable() }
        // Alignment counts from the start of the message; the body starts 8-aligned, as the header ends.
        guard let signature, signature[0] != 0 else {
            guard bodyLength == 0 else { throw Unreadable() }
            return result
        }
        let types = try signatures.value(for: signature) { text throws(Unreadable) in
            guard let parsed = try? Signature(String(cString: text)) else { throw Unreadable() }
            return parsed.types
        }
        var body = WireMessage(base: message, end: count, offset: bodyStart, bigEndian: bigEndian, signatures: signatures)
        var values: [DBusValue] = []
        values.reserveCapacity(types.count)
        for type in types { values.append(try body.value(of: type, depth: 0)) }
        guard body.offset == count else { throw Unreadable() }
        result.body = values
        return result
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

    /// A header field's string, shared through `strings`.
    private mutating func headerString(_ strings: HeaderStrings) throws(Unreadable) -> String {
        let count = Int(try uint32())
        let text = try text(count: count)
        return text.withMemoryRebound(to: CChar.self) { strings.string($0.baseAddress!) }
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
        try singleType(try signatureText())
    }

    /// The one complete type a signature names.
    private func singleType(_ text: UnsafeBufferPointer<UInt8>) throws(Unreadable) -> DBusType {
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
        guard depth <= WireMessage.maximumDepth else { throw Unreadable() }
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
