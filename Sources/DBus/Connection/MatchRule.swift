// SPDX-License-Identifier: Apache-2.0

/// A D-Bus match rule: which signals a stream receives.
///
/// The bus daemon uses the rule to decide which signals to send to the connection; the connection applies it
/// again to route each received signal to the right streams. A rule with a well-known ``sender`` matches only
/// signals from that name's current owner, so a signal forged by another connection never matches.
///
/// ```swift
/// var rule = MatchRule(sender: "io.github.settingsbus.Settings1", interface: "io.github.settingsbus.Settings1",
///                      member: "Changed")
/// rule.argumentPaths[0] = "/org/example/"
/// // type='signal',sender='io.github.settingsbus.Settings1',interface='…',member='Changed',arg0path='/org/example/'
/// ```
public struct MatchRule: Sendable, Hashable {
    /// The sender: a unique or well-known bus name.
    public var sender: BusName?
    /// The interface.
    public var interface: InterfaceName?
    /// The signal name.
    public var member: MemberName?
    /// The exact object path.
    public var path: ObjectPath?
    /// An object path and every path below it.
    public var pathNamespace: ObjectPath?
    /// String arguments that must be equal, by index (0–63).
    public var arguments: [Int: String] = [:]
    /// String or object-path arguments matched as paths (`argNpath`), by index (0–63).
    public var argumentPaths: [Int: String] = [:]
    /// A dotted namespace that the first argument must equal or lie within (`arg0namespace`).
    public var arg0Namespace: String?

    /// Makes a rule for signals; every field left nil matches anything.
    public init(
        sender: BusName? = nil, interface: InterfaceName? = nil, member: MemberName? = nil, path: ObjectPath? = nil,
        pathNamespace: ObjectPath? = nil
    ) {
        self.sender = sender
        self.interface = interface
        self.member = member
        self.path = path
        self.pathNamespace = pathNamespace
    }

    /// Checks the parts that are free text: argument indexes and values.
    ///
    /// - Throws: ``DBusError`` named `org.freedesktop.DBus.Error.MatchRuleInvalid`.
    public func validate() throws(DBusError) {
        for (index, value) in arguments.merging(argumentPaths, uniquingKeysWith: { a, _ in a }) {
            guard (0..<64).contains(index) else {
                throw DBusError(.matchRuleInvalid, "argument index \(index) is out of 0…63")
            }
            guard !value.utf8.contains(0) else {
                throw DBusError(.matchRuleInvalid, "argument \(index) of the rule contains a NUL character")
            }
        }
        if let arg0Namespace, arg0Namespace.isEmpty || arg0Namespace.utf8.contains(0) {
            throw DBusError(.matchRuleInvalid, "arg0namespace must be a non-empty dotted name")
        }
        if path != nil, pathNamespace != nil {
            throw DBusError(.matchRuleInvalid, "a rule cannot have both path and path_namespace")
        }
        if arguments[0] != nil, arg0Namespace != nil {
            throw DBusError(.matchRuleInvalid, "a rule cannot have both arg0 and arg0namespace")
        }
    }

    /// The rule in the text form that `AddMatch` takes.
    public var text: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String) { parts.append("\(key)=\(MatchRule.quote(value))") }
        if let sender { add("sender", sender.rawValue) }
        if let interface { add("interface", interface.rawValue) }
        if let member { add("member", member.rawValue) }
        if let path { add("path", path.rawValue) }
        if let pathNamespace { add("path_namespace", pathNamespace.rawValue) }
        for (index, value) in arguments.sorted(by: { $0.key < $1.key }) { add("arg\(index)", value) }
        for (index, value) in argumentPaths.sorted(by: { $0.key < $1.key }) { add("arg\(index)path", value) }
        if let arg0Namespace { add("arg0namespace", arg0Namespace) }
        return parts.joined(separator: ",")
    }

    /// Quotes a value: inside single quotes nothing is escaped, so an apostrophe closes the quote, is written
    /// as `\'`, and the quote reopens.
    static func quote(_ value: String) -> String {
        "'" + value.replacingApostrophes() + "'"
    }

    /// Whether a received signal satisfies the rule, apart from resolving a well-known ``sender``, which the
    /// connection checks against the name's current owner.
    func matchesIgnoringSender(_ message: DBusMessage) -> Bool {
        guard message.kind == .signal else { return false }
        if let interface, message.interface != interface { return false }
        if let member, message.member != member { return false }
        if let path, message.path != path { return false }
        if let pathNamespace {
            guard let messagePath = message.path?.rawValue else { return false }
            let namespace = pathNamespace.rawValue
            guard namespace == "/" || messagePath == namespace || messagePath.hasPrefix(namespace + "/") else {
                return false
            }
        }
        for (index, expected) in arguments {
            guard index < message.body.count, case .string(let actual) = message.body[index], actual == expected
            else { return false }
        }
        for (index, expected) in argumentPaths {
            guard index < message.body.count else { return false }
            let actual: String
            switch message.body[index] {
            case .string(let text): actual = text
            case .objectPath(let objectPath): actual = objectPath.rawValue
            default: return false
            }
            guard MatchRule.pathMatches(actual, expected) else { return false }
        }
        if let arg0Namespace {
            guard case .string(let actual)? = message.body.first,
                actual == arg0Namespace || actual.hasPrefix(arg0Namespace + ".")
            else { return false }
        }
        return true
    }

    /// `argNpath` semantics: equal, or one ends with `/` and is a prefix of the other.
    static func pathMatches(_ actual: String, _ rule: String) -> Bool {
        if actual == rule { return true }
        if rule.hasSuffix("/") && actual.hasPrefix(rule) { return true }
        if actual.hasSuffix("/") && rule.hasPrefix(actual) { return true }
        return false
    }

    /// The well-known name whose owner must be tracked to check ``sender`` locally, if any.
    var trackedSenderName: String? {
        guard let sender, !sender.rawValue.hasPrefix(":"), sender.rawValue != "org.freedesktop.DBus" else {
            return nil
        }
        return sender.rawValue
    }
}

// MARK: - CustomStringConvertible

extension MatchRule: CustomStringConvertible {
    public var description: String { text }
}

extension String {
    fileprivate func replacingApostrophes() -> String {
        split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''")
    }
}
