// SPDX-License-Identifier: Apache-2.0

/// An object exported at one path.
struct ExportedObject {
    var interfaces: [DBusInterface]

    func interface(_ name: InterfaceName) -> DBusInterface? { interfaces.first { $0.name == name } }
}

extension ConnectionLoop {
    // MARK: - Method-call dispatch

    /// Routes a method call to an exported object, or answers it with the standard error. Loop thread only.
    func dispatchMethodCall(_ message: DBusMessage) {
        guard let path = message.path, let member = message.member else { return }
        let interfaceName = message.interface?.rawValue
        if interfaceName == "org.freedesktop.DBus.Introspectable" || (interfaceName == nil && member == "Introspect") {
            guard member == "Introspect", message.body.isEmpty else {
                return replyError(message, .unknownMethod, "no method \(member) with signature '\(message.signature)' on org.freedesktop.DBus.Introspectable")
            }
            let children = childNames(of: path)
            guard objects[path] != nil || !children.isEmpty else {
                return replyError(message, .unknownObject, "no object at path \(path)")
            }
            reply(message, [.string(Introspection.document(interfaces: objects[path]?.interfaces, children: children))])
            return
        }
        guard let object = objects[path] else {
            return replyError(message, .unknownObject, "no object at path \(path)")
        }
        if interfaceName == "org.freedesktop.DBus.Properties" {
            return dispatchProperties(message, object: object, path: path)
        }
        let method: DBusMethod
        let identifying: Bool
        if let name = message.interface {
            guard let interface = object.interface(name) else {
                return replyError(message, .unknownInterface, "object \(path) has no interface \(name)")
            }
            guard let found = interface.methods.first(where: { $0.name == member }) else {
                return replyError(message, .unknownMethod, "interface \(name) has no method \(member)")
            }
            method = found
            identifying = interface.identifiesCallers
        } else {
            guard let interface = object.interfaces.first(where: { $0.methods.contains { $0.name == member } }),
                let found = interface.methods.first(where: { $0.name == member })
            else {
                return replyError(message, .unknownMethod, "object \(path) has no method \(member)")
            }
            method = found
            identifying = interface.identifiesCallers
        }
        if identifying, isBusConnection, let sender = message.sender?.rawValue, senderUsers.users[sender] == nil {
            return holdUntilIdentified(message, sender: sender)
        }
        guard Self.types(of: message.body, match: method.inputs) else {
            let expected = Signature(types: method.inputs.map(\.type))
            return replyError(
                message, .invalidArgs,
                "\(method.name) takes arguments of type '\(expected)', but the call carried '\(message.signature)'")
        }
        let outputs = method.outputs
        let call = DBusMethodCall(message: message, sender: message.sender.flatMap { senderUsers.users[$0.rawValue] })
        if let immediate = method.immediateHandler {
            let reply: DBusMessage
            do {
                let values = try immediate(call)
                try Self.check(values, of: message, against: outputs)
                reply = Self.validReply(to: message, values)
            } catch is DBusMethodCall.SenderUnixUserNeeded {
                return answerKnowingSender(message, outputs: outputs, immediate)
            } catch {
                reply = Self.errorReply(to: message, error)
            }
            if !message.noReplyExpected { send(reply) }
            return
        }
        if let deferred = method.deferredHandler {
            deferred(
                call,
                DBusReply(afterDispatch: { [weak self] work in self?.afterDispatch(work) ?? false }) {
                    [weak self] result in
                    guard !message.noReplyExpected else { return }
                    let reply = Self.reply(to: message, outputs: outputs) { try result.get() }
                    _ = self?.sendSoon(reply)
                })
            return
        }
        let handler = method.handler
        respond(to: message) { [self] in
            let values: [DBusValue]
            do {
                values = try await handler(call)
            } catch is DBusMethodCall.SenderUnixUserNeeded {
                let credentials = try await senderCredentials(of: message)
                values = try await Self.again(message) {
                    try await handler(DBusMethodCall(message: message, sender: credentials))
                }
            }
            try Self.check(values, of: message, against: outputs)
            return values
        }
    }

    /// Answers a call whose immediate handler asked for the caller's user: runs it again with the user, at once
    /// when the user is known, else when the bus daemon has said it. Loop thread only.
    private func answerKnowingSender(
        _ message: DBusMessage, outputs: [DBusArgument],
        _ immediate: @escaping @Sendable (DBusMethodCall) throws -> [DBusValue]
    ) {
        senderCredentials(of: message) { [self] result in
            let reply: DBusMessage
            switch result {
            case .success(let credentials):
                reply = Self.reply(to: message, outputs: outputs) {
                    try Self.again(message) { try immediate(DBusMethodCall(message: message, sender: credentials)) }
                }
            case .failure(let error):
                reply = Self.errorReply(to: message, error)
            }
            if !message.noReplyExpected { send(reply) }
        }
    }

    /// Holds a call to an interface that identifies its callers until the sender's credentials are known, then
    /// dispatches it, after the sender's calls held before it; a sender whose credentials cannot be found is
    /// answered with why. Other senders' calls go on meanwhile. Loop thread only.
    private func holdUntilIdentified(_ message: DBusMessage, sender: String) {
        if senderUsers.held[sender] != nil {
            senderUsers.held[sender]!.append(message)
            return
        }
        senderUsers.held[sender] = [message]
        senderCredentials(of: message) { [self] result in
            let held = senderUsers.held.removeValue(forKey: sender) ?? []
            for message in held {
                switch result {
                case .success(let credentials):
                    // Known now (or, were the cache full and emptied, dispatched with what was found).
                    if senderUsers.users[sender] == nil { senderUsers.remember(credentials, of: sender) }
                    dispatchMethodCall(message)
                case .failure(let error):
                    if !message.noReplyExpected {
                        send(Self.errorReply(to: message, DBusError(error.name, "the caller could not be identified: \(error.message)")))
                    }
                }
            }
        }
    }

    /// The caller's credentials, found out on the loop thread without blocking it (see
    /// ``senderCredentials(of:done:)``).
    private func senderCredentials(of message: DBusMessage) async throws(DBusError) -> DBusCredentials {
        let result: Result<DBusCredentials, DBusError> = await handOff { deliver in
            let accepted = enqueue { loop in loop.senderCredentials(of: message) { deliver($0) } }
            if !accepted { deliver(.failure(ConnectionLoop.closedError)) }
        }
        return try result.get()
    }

    /// Runs a handler a second time, now that the caller's user is known: asking for it again is a fault.
    private static func again<T>(_ message: DBusMessage, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch is DBusMethodCall.SenderUnixUserNeeded {
            throw secondRequest(message)
        }
    }

    private static func again<T>(_ message: DBusMessage, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch is DBusMethodCall.SenderUnixUserNeeded {
            throw secondRequest(message)
        }
    }

    private static func secondRequest(_ message: DBusMessage) -> DBusError {
        DBusError(.failed, "the handler of \(message.member!) asked for the caller's user though it was given")
    }

    /// Whether values have the arguments' types, one for one (compared without building signatures).
    private static func types(of values: [DBusValue], match arguments: [DBusArgument]) -> Bool {
        values.count == arguments.count && zip(values, arguments).allSatisfy { $0.type == $1.type }
    }

    /// Checks a handler's results against the method's output types.
    private static func check(_ values: [DBusValue], of message: DBusMessage, against outputs: [DBusArgument]) throws {
        guard types(of: values, match: outputs) else {
            throw DBusError(
                .failed,
                "the handler of \(message.member!) returned '\(Signature(types: values.map(\.type)))' instead of "
                    + "'\(Signature(types: outputs.map(\.type)))'")
        }
    }

    /// The reply to `message`: the values `body` returns, when they are of the output types and can be sent, or
    /// the error it throws.
    private static func reply(
        to message: DBusMessage, outputs: [DBusArgument], _ body: () throws -> [DBusValue]
    ) -> DBusMessage {
        do {
            let values = try body()
            try check(values, of: message, against: outputs)
            return validReply(to: message, values)
        } catch {
            return errorReply(to: message, error)
        }
    }

    /// A method return carrying `values`, or an error saying why they cannot be sent.
    private static func validReply(to message: DBusMessage, _ values: [DBusValue]) -> DBusMessage {
        let candidate = DBusMessage.methodReturn(to: message, body: values)
        do {
            try candidate.validate()
            return candidate
        } catch {
            return .error(replyingTo: message, DBusError(.failed, "invalid reply: \(error.message)"))
        }
    }

    /// The error reply for an error a handler threw.
    private static func errorReply(to message: DBusMessage, _ error: any Error) -> DBusMessage {
        if let error = error as? DBusError { return .error(replyingTo: message, sendable(error)) }
        return .error(replyingTo: message, DBusError(.failed, String(describing: error)))
    }

    /// Runs `body` as a task and sends its values, or its error, as the reply to `message`.
    ///
    /// The task builds the libdbus message too: a large reply (a `ReadTree` of 100,000 values) would otherwise
    /// hold up the loop, and every call waiting on it, while it is written.
    func respond(to message: DBusMessage, _ body: @escaping @Sendable () async throws -> [DBusValue]) {
        Task { [self] in
            let reply: DBusMessage
            do {
                reply = Self.validReply(to: message, try await body())
            } catch {
                reply = Self.errorReply(to: message, error)
            }
            guard !message.noReplyExpected else { return }
            if let encoded = EncodedMessage(reply) { _ = enqueue(send: encoded) }
        }
    }

    /// An error whose name can be sent: an invalid name is replaced by `Failed`, keeping it in the message.
    static func sendable(_ error: DBusError) -> DBusError {
        do {
            try NameValidation.check(error.name.rawValue, as: .errorName)
            return error
        } catch {
            return DBusError(.failed, "\(error.name.rawValue): \(error.message)")
        }
    }

    func reply(_ message: DBusMessage, _ values: [DBusValue]) {
        guard !message.noReplyExpected else { return }
        send(.methodReturn(to: message, body: values))
    }

    func replyError(_ message: DBusMessage, _ name: DBusError.Name, _ text: String) {
        guard !message.noReplyExpected else { return }
        send(.error(replyingTo: message, DBusError(name, text)))
    }

    /// The names of the path elements directly below `path` that lead to exported objects.
    func childNames(of path: ObjectPath) -> [String] {
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        var names = Set<String>()
        for key in objects.keys where key.rawValue.hasPrefix(prefix) && key != path {
            let rest = key.rawValue.dropFirst(prefix.count)
            if let first = rest.split(separator: "/").first { names.insert(String(first)) }
        }
        return names.sorted()
    }

    // MARK: - org.freedesktop.DBus.Properties

    private func dispatchProperties(_ message: DBusMessage, object: ExportedObject, path: ObjectPath) {
        let member = message.member!.rawValue
        let body = message.body
        func lookup(_ interfaceValue: DBusValue) -> DBusInterface? {
            guard case .string(let text) = interfaceValue, let name = try? InterfaceName(text),
                let interface = object.interface(name)
            else {
                replyError(message, .unknownInterface, "object \(path) has no interface \(interfaceValue)")
                return nil
            }
            return interface
        }
        func property(_ interface: DBusInterface, _ nameValue: DBusValue) -> DBusProperty? {
            guard case .string(let text) = nameValue, let found = interface.properties.first(where: { $0.name.rawValue == text })
            else {
                replyError(message, .unknownProperty, "interface \(interface.name) has no property \(nameValue)")
                return nil
            }
            return found
        }
        switch (member, message.signature.text) {
        case ("Get", "ss"):
            guard let interface = lookup(body[0]), let property = property(interface, body[1]) else { return }
            respond(to: message) {
                let value = try await property.getter()
                guard value.type == property.type else {
                    throw DBusError(.failed, "property \(property.name) produced '\(value.type)', not '\(property.type)'")
                }
                return [.variant(value)]
            }
        case ("GetAll", "s"):
            guard let interface = lookup(body[0]) else { return }
            respond(to: message) {
                var entries: [DBusDictEntry] = []
                for property in interface.properties {
                    let value = try await property.getter()
                    entries.append(DBusDictEntry(key: .string(property.name.rawValue), value: .variant(value)))
                }
                return [.dictionary(key: .string, value: .variant, entries)]
            }
        case ("Set", "ssv"):
            guard let interface = lookup(body[0]), let property = property(interface, body[1]) else { return }
            guard let setter = property.setter else {
                return replyError(message, .propertyReadOnly, "property \(property.name) is read-only")
            }
            guard case .variant(let value) = body[2], value.type == property.type else {
                return replyError(message, .invalidArgs, "property \(property.name) has type '\(property.type)'")
            }
            let interfaceName = interface.name
            respond(to: message) { [self] in
                try await setter(value)
                let changed = property.changeSignal
                if changed == .emitsValue || changed == .invalidates {
                    let signal = ConnectionLoop.propertiesChanged(
                        path: path, interface: interfaceName,
                        changed: changed == .emitsValue ? [property.name: value] : [:],
                        invalidated: changed == .invalidates ? [property.name] : [])
                    enqueue { $0.send(signal) }
                }
                return []
            }
        default:
            replyError(
                message, .unknownMethod,
                "no method \(member) with signature '\(message.signature)' on org.freedesktop.DBus.Properties")
        }
    }

    /// The `PropertiesChanged` signal for some properties of an interface.
    static func propertiesChanged(
        path: ObjectPath, interface: InterfaceName, changed: [MemberName: DBusValue], invalidated: [MemberName]
    ) -> DBusMessage {
        let entries = changed.sorted { $0.key < $1.key }.map {
            DBusDictEntry(key: .string($0.key.rawValue), value: .variant($0.value))
        }
        return .signal(
            path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            body: [
                .string(interface.rawValue), .dictionary(key: .string, value: .variant, entries),
                .array(.string, invalidated.map { .string($0.rawValue) }),
            ])
    }
}
