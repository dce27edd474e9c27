// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// A D-Bus message from arbitrary bytes, and each of its arguments taken as the broker takes the value of a
/// `Set`: checked for storage, written as the store writes it (its type's signature and GVariant text), and
/// read back as the store reads it.
enum DBusValueCheck {
    /// The key named in storage errors.
    private static let key = try! SettingPath("/fuzz/key")

    static func run(_ bytes: [UInt8]) throws(FuzzFailure) -> FuzzOutcome {
        guard let message = try? DBusMessage(marshalled: bytes) else { return .refused }

        // A connection reads what it receives from the message's bytes: the same message.
        let fromWire: DBusMessage
        do {
            fromWire = try DBusMessage(marshalled: bytes, readingFromWire: true)
        } catch {
            throw FuzzFailure("a message libdbus reads is refused when read from its bytes: \(error)")
        }
        var header = fromWire
        header.body = message.body
        try require(
            header == message && fromWire.body.count == message.body.count
                && zip(fromWire.body, message.body).allSatisfy(identical),
            "\(message) read from its bytes is \(fromWire)")

        // What libdbus accepted marshals again and reads back as the same message.
        let again: DBusMessage
        do {
            again = try DBusMessage(marshalled: try message.marshalled())
        } catch {
            throw FuzzFailure("a message read from the wire does not marshal and read back: \(error)")
        }
        try require(
            again.kind == message.kind && again.path == message.path && again.member == message.member
                && again.interface == message.interface && again.signature == message.signature
                && again.body.count == message.body.count && zip(again.body, message.body).allSatisfy(identical),
            "the message \(message) reads back as \(again)")

        // Built both ways a connection builds what it sends (written in the wire format and read back by
        // libdbus, or appended through libdbus's iterator), it is the same message, its body the same bytes.
        let written: [UInt8]
        let appended: [UInt8]
        do {
            written = try message.marshalled(writingToWire: true)
            appended = try message.marshalled(writingToWire: false)
        } catch {
            throw FuzzFailure("a message libdbus reads is not built both ways: \(error)")
        }
        guard let fromWritten = try? DBusMessage(marshalled: written),
            let fromAppended = try? DBusMessage(marshalled: appended)
        else { throw FuzzFailure("a message built both ways does not read back: \(message)") }
        var writtenHeader = fromWritten
        writtenHeader.body = fromAppended.body
        try require(
            writtenHeader == fromAppended
                && DBusMessage.body(ofMarshalled: written) == DBusMessage.body(ofMarshalled: appended),
            "\(message) written in the wire format reads back as \(fromWritten), appended as \(fromAppended)")

        for value in message.body {
            try checkStorage(of: value)
            if case .variant(let inner) = value { try checkStorage(of: inner) }
        }
        return .accepted
    }

    /// The path of a `Set` value into the store and back out.
    private static func checkStorage(of value: DBusValue) throws(FuzzFailure) {
        do {
            try value.validateForStorage(at: key)
        } catch {
            try require(
                error.code == .invalidValue || error.code == .tooLarge,
                "validateForStorage threw \(error.code) for \(value.type)")
            return
        }
        // The store keeps the type's signature and the value's GVariant text, and reads both back.
        let typeText = value.type.signatureText
        let text = GVariantText.format(value)
        let type: DBusType
        do {
            type = try DBusType(parsing: typeText)
        } catch {
            throw FuzzFailure("the stored type \(typeText) does not parse: \(error.message)")
        }
        try readsBack(value, from: text, as: type, shown: "the stored text of a \(typeText),")

        // The size bound the broker compares with its limit is never below the real marshalled size.
        var reply = DBusMessage(kind: .methodReturn, body: [value])
        reply.replySerial = 1
        reply.serial = 1
        guard let wire = try? reply.marshalled(), wire.count >= 8 else {
            throw FuzzFailure("a \(typeText) that passed validateForStorage cannot be sent")
        }
        let bodyLength = wire[4..<8].reversed().reduce(0) { $0 << 8 | Int($1) }
        try require(wire[0] == UInt8(ascii: "l"), "libdbus marshalled in big-endian order")
        try require(
            bodyLength <= value.approximateSize,
            "a \(typeText) takes \(bodyLength) bytes on the wire, more than its approximateSize \(value.approximateSize)")
    }
}
