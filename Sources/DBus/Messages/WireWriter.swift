// SPDX-License-Identifier: Apache-2.0

internal import CDBus

/// Writes a message in the D-Bus wire format (little-endian), for libdbus to read back with
/// `dbus_message_demarshal`, instead of building it through libdbus's message iterator.
///
/// libdbus rewrites the body's signature in the header after every argument appended at the top level, so a
/// message of several arguments costs it more than reading the finished bytes back does. Instructions libdbus
/// executes per message, appended (body first) against read back: the settings `Changed` signal (five
/// arguments) 71k against 39k, a `Set` call (two) 41k against 37k; with one argument appending is cheaper (a
/// `Get` call 28k against 33k, its reply 17k against 25k). ``MessageCoding/encode(_:)`` therefore writes
/// messages of two arguments or more here.
///
/// Nothing here is trusted: libdbus validates every byte it reads back (header fields, signature, alignment,
/// UTF-8, nesting, lengths), and a message it refuses is built through the iterator instead. The test suite
/// and the dbus-value fuzz check compare the two ways of building a message
/// (`WireWriterTests.randomBodiesAreWrittenByTheFastWriterAsTheLibdbusWriterAppendsThem`); why both are kept
/// is said at ``MessageCoding``.
struct WireWriter {
    private(set) var bytes: [UInt8] = []

    /// The message's bytes, with `serial` in its header (the wire format has no serial 0).
    static func marshal(_ message: DBusMessage, serial: UInt32) -> [UInt8] {
        var writer = WireWriter()
        writer.bytes.reserveCapacity(256)
        writer.bytes.append(UInt8(ascii: "l"))
        switch message.kind {
        case .methodCall: writer.bytes.append(1)
        case .methodReturn: writer.bytes.append(2)
        case .error: writer.bytes.append(3)
        case .signal: writer.bytes.append(4)
        }
        writer.bytes.append((message.noReplyExpected ? 0x1 : 0) | (message.autoStart ? 0 : 0x2))
        writer.bytes.append(1)  // protocol version
        writer.uint32(0)  // body length, filled in below
        writer.uint32(serial)
        // The header fields: an array of (code, variant).
        writer.uint32(0)
        let fieldsStart = writer.bytes.count
        if let path = message.path { writer.field(1, "o", path.rawValue) }
        if let interface = message.interface { writer.field(2, "s", interface.rawValue) }
        if let member = message.member { writer.field(3, "s", member.rawValue) }
        if let errorName = message.errorName { writer.field(4, "s", errorName.rawValue) }
        if let replySerial = message.replySerial {
            writer.fieldStart(5, "u")
            writer.uint32(replySerial)
        }
        if let destination = message.destination { writer.field(6, "s", destination.rawValue) }
        if !message.body.isEmpty {
            writer.fieldStart(8, "g")
            writer.signature { writer in for value in message.body { writer.typeCodes(of: value.type) } }
        }
        writer.patch(UInt32(writer.bytes.count - fieldsStart), at: 12)
        writer.align(8)
        let bodyStart = writer.bytes.count
        for value in message.body { writer.value(value) }
        writer.patch(UInt32(writer.bytes.count - bodyStart), at: 4)
        return writer.bytes
    }

    /// The message as libdbus reads it back from ``marshal(_:serial:)``, without a serial, so that the
    /// connection gives it the next one; nil when libdbus refuses the bytes.
    static func libdbusMessage(_ message: DBusMessage) -> OpaquePointer? {
        guard let pointer = try? MessageCoding.demarshal(marshal(message, serial: 1)) else { return nil }
        dbus_message_set_serial(pointer, 0)
        return pointer
    }

    // MARK: - Header

    private mutating func fieldStart(_ code: UInt8, _ type: Unicode.Scalar) {
        align(8)
        bytes.append(code)
        bytes.append(1)
        bytes.append(UInt8(ascii: type))
        bytes.append(0)
    }

    private mutating func field(_ code: UInt8, _ type: Unicode.Scalar, _ text: String) {
        fieldStart(code, type)
        string(text)
    }

    // MARK: - Fixed-size values

    private mutating func align(_ boundary: Int) {
        let padding = (boundary - bytes.count % boundary) % boundary
        for _ in 0..<padding { bytes.append(0) }
    }

    private mutating func integer<T: FixedWidthInteger>(_ value: T) {
        align(MemoryLayout<T>.size)
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private mutating func uint32(_ value: UInt32) { integer(value) }

    /// Overwrites the 4-aligned `UInt32` at `offset`, written earlier as a placeholder.
    private mutating func patch(_ value: UInt32, at offset: Int) {
        withUnsafeBytes(of: value.littleEndian) { raw in
            for index in 0..<4 { bytes[offset + index] = raw[index] }
        }
    }

    // MARK: - Strings and signatures

    private mutating func string(_ text: String) {
        uint32(UInt32(text.utf8.count))
        bytes.append(contentsOf: text.utf8)
        bytes.append(0)
    }

    /// A signature value: its length in one byte, the type codes `body` writes, a NUL.
    private mutating func signature(_ body: (inout WireWriter) -> Void) {
        let lengthAt = bytes.count
        bytes.append(0)
        body(&self)
        bytes[lengthAt] = UInt8(truncatingIfNeeded: bytes.count - lengthAt - 1)
        bytes.append(0)
    }

    /// The type codes of one complete type, as in a signature.
    private mutating func typeCodes(of type: DBusType) {
        bytes.append(contentsOf: type.signatureText.utf8)
    }

    // MARK: - Values

    private mutating func value(_ value: DBusValue) {
        switch value {
        case .byte(let v): bytes.append(v)
        case .boolean(let v): uint32(v ? 1 : 0)
        case .int16(let v): integer(v)
        case .uint16(let v): integer(v)
        case .int32(let v): integer(v)
        case .uint32(let v): integer(v)
        case .int64(let v): integer(v)
        case .uint64(let v): integer(v)
        case .double(let v): integer(v.bitPattern)
        case .string(let v): string(v)
        case .objectPath(let v): string(v.rawValue)
        case .signature(let v):
            signature { writer in for type in v.types { writer.typeCodes(of: type) } }
        case .variant(let inner):
            signature { $0.typeCodes(of: inner.type) }
            self.value(inner)
        case .array(let element, let elements):
            array(alignment: element.wireAlignment) { writer in
                if element == .byte {
                    for case .byte(let b) in elements { writer.bytes.append(b) }
                } else {
                    for element in elements { writer.value(element) }
                }
            }
        case .dictionary(_, _, let entries):
            array(alignment: 8) { writer in
                for entry in entries {
                    writer.align(8)
                    writer.value(entry.key)
                    writer.value(entry.value)
                }
            }
        case .structure(let fields):
            align(8)
            for field in fields { self.value(field) }
        }
    }

    /// An array: its length in bytes (the padding before the first element not counted), then what `body`
    /// writes.
    private mutating func array(alignment: Int, _ body: (inout WireWriter) -> Void) {
        uint32(0)
        let lengthAt = bytes.count - 4
        align(alignment)
        let start = bytes.count
        body(&self)
        patch(UInt32(bytes.count - start), at: lengthAt)
    }
}
