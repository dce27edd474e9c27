// SPDX-License-Identifier: Apache-2.0

internal import CDBus

extension DBusMessage {
    /// The message in the D-Bus wire format, as a peer would receive it (libdbus's `dbus_message_marshal`).
    ///
    /// The wire format has no serial 0: a message not given a serial yet is written with serial 1.
    ///
    /// - Throws: ``DBusError`` when the message fails ``validate()`` (nothing invalid reaches libdbus) or
    ///   libdbus runs out of memory.
    public func marshalled() throws(DBusError) -> [UInt8] {
        try validate()
        return try marshalled(from: try MessageCoding.encode(self))
    }

    /// ``marshalled()``, with the message built one given way, whatever its arguments: written in the wire
    /// format and read back by libdbus (``WireWriter``), or through libdbus's iterator. The two must give the
    /// same message: the tests and the dbus-value fuzz check compare them.
    ///
    /// - Throws: as ``marshalled()``; `Failed` when libdbus refuses to read back what ``WireWriter`` wrote.
    package func marshalled(writingToWire: Bool) throws(DBusError) -> [UInt8] {
        try validate()
        if writingToWire {
            guard let pointer = WireWriter.libdbusMessage(self) else {
                throw DBusError(.failed, "libdbus refused the written message of signature '\(signature)'")
            }
            return try marshalled(from: pointer)
        }
        return try marshalled(from: try MessageCoding.encodeWithIterator(self))
    }

    /// The body of a message in the wire format, as ``marshalled()`` writes it (little-endian): what follows
    /// the header fields and their padding to 8. The tests and the dbus-value fuzz check compare bodies with it.
    package static func body(ofMarshalled bytes: [UInt8]) -> ArraySlice<UInt8> {
        let fieldsLength = bytes[12..<16].reversed().reduce(0) { $0 << 8 | Int($1) }
        return bytes[min(bytes.count, (16 + fieldsLength + 7) & ~7)...]
    }

    /// The bytes of a libdbus message, which this releases.
    private func marshalled(from pointer: OpaquePointer) throws(DBusError) -> [UInt8] {
        defer { dbus_message_unref(pointer) }
        dbus_message_set_serial(pointer, serial == 0 ? 1 : serial)
        var buffer: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        guard dbus_message_marshal(pointer, &buffer, &length) != 0, let buffer else {
            throw DBusError(.noMemory, "libdbus could not allocate memory to marshal a message")
        }
        defer { dbus_free(buffer) }
        return buffer.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
            Array(UnsafeBufferPointer(start: $0, count: Int(length)))
        }
    }

    /// Reads a message in the D-Bus wire format (libdbus's `dbus_message_demarshal`), which checks every
    /// byte: header fields, signature, alignment, UTF-8 of strings, nesting, lengths.
    ///
    /// - Parameter bytes: exactly one whole message.
    /// - Throws: ``DBusError`` named `InvalidArgs` when the bytes are not one valid message, or the message
    ///   carries a type SettingsBus does not hold (unix file descriptors).
    public init(marshalled bytes: [UInt8]) throws(DBusError) {
        try self.init(marshalled: bytes, readingFromWire: false)
    }

    /// ``init(marshalled:)``, or, `readingFromWire`, with the message read from its bytes alone
    /// (``WireMessage``, which a connection tries first on what it receives) instead of through libdbus's
    /// accessors and iterator. The two readers must agree: the tests and the dbus-value fuzz check compare them.
    ///
    /// - Throws: as ``init(marshalled:)``; `Failed` when the wire reader cannot read a message libdbus reads.
    package init(marshalled bytes: [UInt8], readingFromWire: Bool) throws(DBusError) {
        // libdbus reads the length fields of the fixed 16-byte header before it validates anything.
        guard bytes.count >= 16, bytes.count <= Int(Int32.max) else {
            throw DBusError(.invalidArgs, "\(bytes.count) bytes are not a D-Bus message (a header alone is 16)")
        }
        let needed = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { dbus_message_demarshal_bytes_needed($0.baseAddress, 16) }
        }
        guard needed == bytes.count else {
            throw DBusError(
                .invalidArgs,
                needed < 0
                    ? "the bytes do not start with a valid D-Bus message header"
                    : "the header says the message is \(needed) bytes long, but there are \(bytes.count)")
        }
        let pointer = try MessageCoding.demarshal(bytes)
        defer { dbus_message_unref(pointer) }
        self = try MessageCoding.decode(pointer)
        if readingFromWire {
            do {
                self = try WireMessage.read(pointer, strings: HeaderStrings(), signatures: CStringCache<[DBusType]>())
            } catch {
                throw DBusError(.failed, "a message of signature '\(signature)' was not read from its bytes")
            }
        }
    }
}
