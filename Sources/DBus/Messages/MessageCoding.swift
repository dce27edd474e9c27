// SPDX-License-Identifier: Apache-2.0

internal import CDBus
internal import Glibc

/// Converts between ``DBusMessage`` and libdbus messages.
///
/// Every function here runs on a connection's own thread. Encoding expects a message that passed
/// ``DBusMessage/validate()``, so nothing reaches libdbus that could make it abort; decoding reads what libdbus
/// already validated on receipt and fails only on types SettingsBus does not carry (unix fds).
///
/// Why there is a second writer and reader (``WireWriter``, ``WireMessage``) beside these: libdbus's iterator
/// rewrites the signature header field after each top-level argument appended, and re-reads the signature at
/// every step when reading, which made it most of the cost of a `Changed` signal or a large reply (the
/// figures are in ``WireWriter`` and docs/benchmarks.md). These stay as the way for what the Swift pair does
/// not take (messages of one argument or none, anything it gives up on) and as the reference it is tested
/// against: `WireWriterTests.randomBodiesAreWrittenByTheFastWriterAsTheLibdbusWriterAppendsThem` and
/// `WireMessageTests.randomBodiesAreReadByTheFastReaderAsTheLibdbusReaderReadsThem` run both on the same
/// seeded random values ([0022](docs/decisions/0022-messages-in-the-wire-format.md)).
enum MessageCoding {
    private static func code(_ character: Unicode.Scalar) -> Int32 { Int32(character.value) }

    // MARK: - Encoding

    /// Builds a libdbus message; the caller owns the returned reference.
    ///
    /// A message of two arguments or more is written in the wire format and read back by libdbus
    /// (``WireWriter``), which costs libdbus less than appending them; others, and any message libdbus
    /// refuses to read back, are built through its message iterator.
    static func encode(_ message: DBusMessage) throws(DBusError) -> OpaquePointer {
        if message.body.count >= 2, let pointer = WireWriter.libdbusMessage(message) { return pointer }
        return try encodeWithIterator(message)
    }

    /// Reads one whole message from its bytes in the wire format (`dbus_message_demarshal`), which checks
    /// every byte; the caller owns the returned reference.
    ///
    /// - Throws: ``DBusError`` named `InvalidArgs`, with libdbus's reason, when the bytes are not one valid
    ///   message.
    static func demarshal(_ bytes: [UInt8]) throws(DBusError) -> OpaquePointer {
        var error = CDBus.DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        let pointer = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                dbus_message_demarshal($0.baseAddress, Int32(buffer.count), &error)
            }
        }
        guard let pointer else {
            let reason = dbus_error_is_set(&error) != 0 ? String(cString: error.message) : "libdbus gave no reason"
            throw DBusError(.invalidArgs, "not a valid D-Bus message: \(reason)")
        }
        return pointer
    }

    /// Builds a libdbus message through libdbus's setters and message iterator.
    ///
    /// The corresponding libdbus functions are `dbus_message_new` and `dbus_message_iter_append_basic`.
    static func encodeWithIterator(_ message: DBusMessage) throws(DBusError) -> OpaquePointer {
        let type: Int32
        switch message.kind {
        case .methodCall: type = DBUS_MESSAGE_TYPE_METHOD_CALL
        case .methodReturn: type = DBUS_MESSAGE_TYPE_METHOD_RETURN
        case .error: type = DBUS_MESSAGE_TYPE_ERROR
        case .signal: type = DBUS_MESSAGE_TYPE_SIGNAL
        }
        guard let pointer = dbus_message_new(type) else { throw outOfMemory() }
        var ok = true
        // The body goes in first: libdbus rewrites the signature header field after each argument appended
        // at the top level, walking every field before it, which costs less with the names not there yet
        // (libdbus's own instruction counts: a `Set` call 59k → 41k, the `Changed` signal 126k → 71k).
        if !message.body.isEmpty {
            var iter = DBusMessageIter()
            dbus_message_iter_init_append(pointer, &iter)
            for value in message.body where ok {
                ok = append(value, to: &iter)
            }
        }
        if let path = message.path { ok = ok && dbus_message_set_path(pointer, path.rawValue) != 0 }
        if let interface = message.interface {
            ok = ok && dbus_message_set_interface(pointer, interface.rawValue) != 0
        }
        if let member = message.member { ok = ok && dbus_message_set_member(pointer, member.rawValue) != 0 }
        if let errorName = message.errorName {
            ok = ok && dbus_message_set_error_name(pointer, errorName.rawValue) != 0
        }
        if let destination = message.destination {
            ok = ok && dbus_message_set_destination(pointer, destination.rawValue) != 0
        }
        if let replySerial = message.replySerial {
            ok = ok && dbus_message_set_reply_serial(pointer, replySerial) != 0
        }
        dbus_message_set_no_reply(pointer, message.noReplyExpected ? 1 : 0)
        dbus_message_set_auto_start(pointer, message.autoStart ? 1 : 0)
        guard ok else {
            dbus_message_unref(pointer)
            throw outOfMemory()
        }
        return pointer
    }

    private static func outOfMemory() -> DBusError {
        DBusError(.noMemory, "libdbus could not allocate memory for a message")
    }

    private static func appendBasic<T>(_ value: T, _ type: Int32, to iter: inout DBusMessageIter) -> Bool {
        var copy = value
        return withUnsafePointer(to: &copy) { dbus_message_iter_append_basic(&iter, type, $0) != 0 }
    }

    private static func appendString(_ text: String, _ type: Int32, to iter: inout DBusMessageIter) -> Bool {
        text.withCString { pointer in
            var cString: UnsafePointer<CChar>? = pointer
            return dbus_message_iter_append_basic(&iter, type, &cString) != 0
        }
    }

    private static func withContainer(
        _ type: Int32, _ signature: String?, in iter: inout DBusMessageIter,
        _ body: (inout DBusMessageIter) -> Bool
    ) -> Bool {
        var sub = DBusMessageIter()
        let opened: Bool
        if let signature {
            opened = signature.withCString { dbus_message_iter_open_container(&iter, type, $0, &sub) != 0 }
        } else {
            opened = dbus_message_iter_open_container(&iter, type, nil, &sub) != 0
        }
        guard opened else { return false }
        guard body(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }

    static func append(_ value: DBusValue, to iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(let v): return appendBasic(v, code("y"), to: &iter)
        case .boolean(let v): return appendBasic(dbus_bool_t(v ? 1 : 0), code("b"), to: &iter)
        case .int16(let v): return appendBasic(v, code("n"), to: &iter)
        case .uint16(let v): return appendBasic(v, code("q"), to: &iter)
        case .int32(let v): return appendBasic(v, code("i"), to: &iter)
        case .uint32(let v): return appendBasic(v, code("u"), to: &iter)
        case .int64(let v): return appendBasic(v, code("x"), to: &iter)
        case .uint64(let v): return appendBasic(v, code("t"), to: &iter)
        case .double(let v): return appendBasic(v, code("d"), to: &iter)
        case .string(let v): return appendString(v, code("s"), to: &iter)
        case .objectPath(let v): return appendString(v.rawValue, code("o"), to: &iter)
        case .signature(let v): return appendString(v.text, code("g"), to: &iter)
        case .variant(let inner):
            return withContainer(code("v"), inner.type.signatureText, in: &iter) { append(inner, to: &$0) }
        case .array(.byte, let elements):
            let bytes = elements.map { element -> UInt8 in
                if case .byte(let b) = element { return b }
                return 0  // unreachable: validate() checked every element's type
            }
            return withContainer(code("a"), "y", in: &iter) { sub in
                bytes.withUnsafeBufferPointer { buffer in
                    var base = buffer.baseAddress
                    if base == nil { return true }
                    return dbus_message_iter_append_fixed_array(&sub, code("y"), &base, Int32(buffer.count)) != 0
                }
            }
        case .array(let element, let elements):
            return withContainer(code("a"), element.signatureText, in: &iter) { sub in
                elements.allSatisfy { append($0, to: &sub) }
            }
        case .dictionary(let key, let valueType, let entries):
            let entrySignature = "{" + key.signatureText + valueType.signatureText + "}"
            return withContainer(code("a"), entrySignature, in: &iter) { sub in
                entries.allSatisfy { entry in
                    withContainer(code("e"), nil, in: &sub) { entryIter in
                        append(entry.key, to: &entryIter) && append(entry.value, to: &entryIter)
                    }
                }
            }
        case .structure(let fields):
            return withContainer(code("r"), nil, in: &iter) { sub in fields.allSatisfy { append($0, to: &sub) } }
        }
    }

    // MARK: - Decoding

    /// Reads a libdbus message into a ``DBusMessage``.
    ///
    /// - Throws: ``DBusError`` named `InvalidArgs` when the message carries a type SettingsBus cannot hold, or is
    ///   of a message type the specification does not define.
    /// - Parameters:
    ///   - strings: header strings to reuse (a connection's own); without them, each is made anew.
    ///   - signatures: the types of signatures seen before (a connection's own); with them and `strings`, the
    ///     message is read from its bytes (``WireMessage``), and through libdbus only if that reader gives up.
    static func decode(
        _ pointer: OpaquePointer, strings: HeaderStrings? = nil, signatures: CStringCache<[DBusType]>? = nil
    ) throws(DBusError) -> DBusMessage {
        if let strings, let signatures,
            let message = try? WireMessage.read(pointer, strings: strings, signatures: signatures)
        {
            return message
        }
        let kind: DBusMessage.Kind
        switch dbus_message_get_type(pointer) {
        case DBUS_MESSAGE_TYPE_METHOD_CALL: kind = .methodCall
        case DBUS_MESSAGE_TYPE_METHOD_RETURN: kind = .methodReturn
        case DBUS_MESSAGE_TYPE_ERROR: kind = .error
        case DBUS_MESSAGE_TYPE_SIGNAL: kind = .signal
        case let other:
            // The specification says a message of an unknown type must be ignored; libdbus passes it on.
            throw DBusError(.invalidArgs, "a message of unknown type \(other) is ignored")
        }
        var message = DBusMessage(kind: kind)
        message.serial = dbus_message_get_serial(pointer)
        let replySerial = dbus_message_get_reply_serial(pointer)
        message.replySerial = replySerial == 0 ? nil : replySerial
        // libdbus validated every header field on receipt, so these wrap without checking again.
        func string(_ text: UnsafePointer<CChar>) -> String { strings?.string(text) ?? String(cString: text) }
        if let path = dbus_message_get_path(pointer) { message.path = ObjectPath(trusted: string(path)) }
        if let interface = dbus_message_get_interface(pointer) {
            message.interface = InterfaceName(trusted: string(interface))
        }
        if let member = dbus_message_get_member(pointer) {
            message.member = MemberName(trusted: string(member))
        }
        if let errorName = dbus_message_get_error_name(pointer) {
            message.errorName = DBusError.Name(rawValue: string(errorName))
        }
        if let destination = dbus_message_get_destination(pointer) {
            message.destination = BusName(trusted: string(destination))
        }
        if let sender = dbus_message_get_sender(pointer) {
            message.sender = BusName(trusted: string(sender))
        }
        message.noReplyExpected = dbus_message_get_no_reply(pointer) != 0
        message.autoStart = dbus_message_get_auto_start(pointer) != 0
        message.body = try iteratorBody(pointer)
        return message
    }

    /// The arguments read through libdbus's message iterator.
    static func iteratorBody(_ pointer: OpaquePointer) throws(DBusError) -> [DBusValue] {
        var iter = DBusMessageIter()
        if dbus_message_iter_init(pointer, &iter) != 0 {
            var body: [DBusValue] = []
            // The signature has at least one character per argument: one allocation for the arguments.
            if let signature = dbus_message_get_signature(pointer) { body.reserveCapacity(strlen(signature)) }
            repeat {
                body.append(try read(&iter))
            } while dbus_message_iter_next(&iter) != 0
            return body
        }
        return []
    }

    private static func basic(_ iter: inout DBusMessageIter) -> DBusBasicValue {
        var value = DBusBasicValue()
        dbus_message_iter_get_basic(&iter, &value)
        return value
    }

    private static func currentType(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusType {
        guard let raw = dbus_message_iter_get_signature(&iter) else {
            throw DBusError(.noMemory, "libdbus could not allocate memory for a signature")
        }
        defer { dbus_free(raw) }
        return try DBusType(parsing: String(cString: raw))
    }

    /// The basic type of a libdbus type code; nil for a container or an unknown code.
    private static func basicType(_ code: Int32) -> DBusType? {
        UInt8(exactly: code).flatMap { DBusType(basicCode: $0) }
    }

    /// The types of the arrays messages carry most, made once: a `DBusType` array or dictionary is a box.
    private static let stringArray = DBusType.array(.string)
    private static let byteArray = DBusType.array(.byte)
    private static let variantArray = DBusType.array(.variant)
    private static let stringVariantDictionary = DBusType.dictionary(key: .string, value: .variant)
    private static let stringStringDictionary = DBusType.dictionary(key: .string, value: .string)

    /// The type of the array `iter` is at; `elements` is recursed into it.
    ///
    /// Arrays of a basic type or of variants, and dictionaries with a basic key and a basic or variant value
    /// (read from their first entry), are typed from their type codes; other arrays, and empty dictionaries,
    /// from their signature, which libdbus allocates and which is parsed.
    private static func arrayType(
        _ iter: inout DBusMessageIter, elements: inout DBusMessageIter
    ) throws(DBusError) -> DBusType {
        let element = dbus_message_iter_get_element_type(&iter)
        switch element {
        case code("s"): return stringArray
        case code("y"): return byteArray
        case code("v"): return variantArray
        case code("e"):
            guard dbus_message_iter_get_arg_type(&elements) == code("e") else { break }
            var entry = DBusMessageIter()
            dbus_message_iter_recurse(&elements, &entry)
            guard let key = basicType(dbus_message_iter_get_arg_type(&entry)) else { break }
            dbus_message_iter_next(&entry)
            let valueCode = dbus_message_iter_get_arg_type(&entry)
            switch (key, valueCode) {
            case (.string, code("v")): return stringVariantDictionary
            case (.string, code("s")): return stringStringDictionary
            case (_, code("v")): return .dictionary(key: key, value: .variant)
            default:
                if let value = basicType(valueCode) { return .dictionary(key: key, value: value) }
            }
        default:
            if let basic = basicType(element) { return .array(basic) }
        }
        return try currentType(&iter)
    }

    static func read(_ iter: inout DBusMessageIter) throws(DBusError) -> DBusValue {
        let type = dbus_message_iter_get_arg_type(&iter)
        switch type {
        case code("y"): return .byte(basic(&iter).byt)
        case code("b"): return .boolean(basic(&iter).bool_val != 0)
        case code("n"): return .int16(basic(&iter).i16)
        case code("q"): return .uint16(basic(&iter).u16)
        case code("i"): return .int32(basic(&iter).i32)
        case code("u"): return .uint32(basic(&iter).u32)
        case code("x"): return .int64(Int64(basic(&iter).i64))
        case code("t"): return .uint64(UInt64(basic(&iter).u64))
        case code("d"): return .double(basic(&iter).dbl)
        case code("s"): return .string(String(cString: basic(&iter).str))
        case code("o"): return .objectPath(ObjectPath(trusted: String(cString: basic(&iter).str)))
        case code("g"): return .signature(try Signature(String(cString: basic(&iter).str)))
        case code("v"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return .variant(try read(&sub))
        case code("r"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != 0 {
                fields.append(try read(&sub))
                dbus_message_iter_next(&sub)
            }
            return .structure(fields)
        case code("a"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            let containerType = try arrayType(&iter, elements: &sub)
            switch containerType {
            case .array(.byte):
                var base: UnsafePointer<UInt8>? = nil
                var count: Int32 = 0
                withUnsafeMutablePointer(to: &base) { dbus_message_iter_get_fixed_array(&sub, $0, &count) }
                let bytes = base.map { Array(UnsafeBufferPointer(start: $0, count: Int(count))) } ?? []
                return .array(.byte, bytes.map(DBusValue.byte))
            case .array(let element):
                var elements: [DBusValue] = []
                while dbus_message_iter_get_arg_type(&sub) != 0 {
                    elements.append(try read(&sub))
                    dbus_message_iter_next(&sub)
                }
                return .array(element, elements)
            case .dictionary(let key, let value):
                var entries: [DBusDictEntry] = []
                while dbus_message_iter_get_arg_type(&sub) != 0 {
                    var entryIter = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &entryIter)
                    let entryKey = try read(&entryIter)
                    dbus_message_iter_next(&entryIter)
                    let entryValue = try read(&entryIter)
                    entries.append(DBusDictEntry(key: entryKey, value: entryValue))
                    dbus_message_iter_next(&sub)
                }
                return .dictionary(key: key, value: value, entries)
            default:
                throw DBusError(.invalidArgs, "unexpected array type '\(containerType)'")
            }
        default:
            let shown = type > 0 && type < 128 ? String(UnicodeScalar(UInt8(type))) : "\(type)"
            throw DBusError(.invalidArgs, "arguments of type '\(shown)' are not supported")
        }
    }
}
