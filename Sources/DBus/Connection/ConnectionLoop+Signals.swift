// SPDX-License-Identifier: Apache-2.0

/// Where the signals of one subscription go: called on the loop thread.
struct SignalSink: Sendable {
    /// Takes one signal.
    let deliver: @Sendable (DBusMessage) -> Void
    /// Called once when the subscription ends with the connection (or the rule fails).
    let finish: @Sendable () -> Void
}

/// One match rule and the subscriptions that share it, on the loop thread.
///
/// A class, so that routing a signal visits each rule without copying it out of ``ConnectionLoop/rules``.
final class RuleState {
    let rule: MatchRule
    /// The rule's sender and member, kept apart so that checking them does not copy the rule.
    let sender: BusName?
    let member: MemberName?
    /// The well-known name whose owner the rule's sender is checked against (``MatchRule/trackedSenderName``).
    let trackedName: String?
    /// That name's track, once the rule follows it (it holds a count on it, so it stays while the rule does).
    var track: NameTrack?
    var subscribers: [UInt64: SignalSink] = [:]
    /// Whether the bus has confirmed the rule (AddMatch replied).
    var ready = false
    /// Subscribers waiting for the rule to become active.
    var waiters: [(Result<Void, DBusError>) -> Void] = []

    init(rule: MatchRule) {
        self.rule = rule
        sender = rule.sender
        member = rule.member
        trackedName = rule.trackedSenderName
    }
}

/// The owner of a well-known name that sender-restricted rules refer to, kept current from `NameOwnerChanged`.
final class NameTrack {
    var count = 1
    var owner: String?
    var known = false
    var waiters: [(Result<Void, DBusError>) -> Void]

    init(waiters: [(Result<Void, DBusError>) -> Void]) {
        self.waiters = waiters
    }
}

extension ConnectionLoop {
    // MARK: - Subscriptions

    /// Adds a stream to a rule, asking the bus for the rule if it is new; `done` runs once the rule is active.
    func subscribe(
        _ rule: MatchRule, id: UInt64, sink: SignalSink,
        done: @escaping (Result<Void, DBusError>) -> Void
    ) {
        guard connection != nil else {
            done(.failure(endReason ?? ConnectionLoop.closedError))
            return
        }
        let key = rule.text
        if let state = rules[key] {
            state.subscribers[id] = sink
            if state.ready { done(.success(())) } else { state.waiters.append(done) }
            return
        }
        let state = RuleState(rule: rule)
        state.subscribers[id] = sink
        state.waiters.append(done)
        rules[key] = state
        rememberHeaderStrings(of: rule)
        guard isBusConnection else {
            ruleActivated(key, .success(()), tracked: false)
            return
        }
        let activate = { [self] in
            addMatch(key) { [self] result in ruleActivated(key, result, tracked: state.trackedName != nil) }
        }
        if let name = state.trackedName {
            trackName(name) { [self] result in
                switch result {
                case .success: activate()
                case .failure(let error): ruleActivated(key, .failure(error), tracked: false)
                }
            }
            state.track = trackedNames[name]
        } else {
            activate()
        }
    }

    /// Lets received messages share the strings of a rule's header fields, which makes comparing them cheap.
    private func rememberHeaderStrings(of rule: MatchRule) {
        if let sender = rule.sender { headerStrings.remember(sender.rawValue) }
        if let interface = rule.interface { headerStrings.remember(interface.rawValue) }
        if let member = rule.member { headerStrings.remember(member.rawValue) }
        if let path = rule.path { headerStrings.remember(path.rawValue) }
    }

    private func ruleActivated(_ key: String, _ result: Result<Void, DBusError>, tracked: Bool) {
        guard let state = rules[key] else { return }
        let waiters = state.waiters
        state.waiters = []
        switch result {
        case .success:
            state.ready = true
            if state.subscribers.isEmpty { dropRule(key) }
            for waiter in waiters { waiter(.success(())) }
        case .failure(let error):
            rules[key] = nil
            if tracked, let name = state.trackedName { untrackName(name) }
            for waiter in waiters { waiter(.failure(error)) }
            for sink in state.subscribers.values { sink.finish() }
        }
    }

    /// Removes a stream; the last one to leave an active rule removes the rule from the bus.
    func unsubscribe(_ key: String, id: UInt64) {
        guard let state = rules[key], state.subscribers.removeValue(forKey: id) != nil else { return }
        if state.subscribers.isEmpty && state.ready { dropRule(key) }
    }

    private func dropRule(_ key: String) {
        guard let state = rules.removeValue(forKey: key) else { return }
        guard isBusConnection else { return }
        removeMatch(key)
        if let name = state.trackedName { untrackName(name) }
    }

    private func addMatch(_ rule: String, completion: @escaping (Result<Void, DBusError>) -> Void) {
        callBus("AddMatch", [.string(rule)]) { result in
            switch result {
            case .success: completion(.success(()))
            case .failure(let error as DBusError): completion(.failure(error))
            case .failure(let error): completion(.failure(DBusError(.failed, "AddMatch failed: \(error)")))
            }
        }
    }

    private func removeMatch(_ rule: String) {
        var message = DBusMessage.methodCall(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "RemoveMatch", body: [.string(rule)])
        message.noReplyExpected = true
        send(message)
    }

    func finishAllStreams() {
        let all = rules
        rules.removeAll()
        trackedNames.removeAll()
        for state in all.values {
            for waiter in state.waiters { waiter(.failure(endReason ?? ConnectionLoop.closedError)) }
            for sink in state.subscribers.values { sink.finish() }
        }
    }

    // MARK: - Delivery

    func deliverSignal(_ message: DBusMessage) {
        if message.sender?.rawValue == "org.freedesktop.DBus", message.member?.rawValue == "NameOwnerChanged",
            message.interface?.rawValue == "org.freedesktop.DBus", message.body.count == 3,
            case .string(let name) = message.body[0], case .string(let newOwner) = message.body[2]
        {
            if let track = trackedNames[name] {
                track.owner = newOwner.isEmpty ? nil : newOwner
                track.known = true
            }
            if newOwner.isEmpty { senderLeft(name) }
        }
        for state in rules.values {
            // The member first: most rules a signal does not match differ in it, and are passed over quickly.
            if let member = state.member, message.member != member { continue }
            guard state.rule.matchesIgnoringSender(message) && senderMatches(state, message) else { continue }
            for sink in state.subscribers.values { sink.deliver(message) }
        }
    }

    private func senderMatches(_ state: RuleState, _ message: DBusMessage) -> Bool {
        guard let sender = state.sender else { return true }
        guard let actual = message.sender?.rawValue else { return false }
        if let tracked = state.trackedName {
            guard let track = state.track ?? trackedNames[tracked], track.known, let owner = track.owner else {
                return false
            }
            return owner == actual
        }
        return sender.rawValue == actual
    }

    // MARK: - Name owners

    private func nameOwnerRule(_ name: String) -> String {
        var rule = MatchRule(
            sender: "org.freedesktop.DBus", interface: "org.freedesktop.DBus", member: "NameOwnerChanged")
        rule.arguments[0] = name
        return rule.text
    }

    /// Starts following the owner of a well-known name; `done` runs once the current owner is known.
    private func trackName(_ name: String, done: @escaping (Result<Void, DBusError>) -> Void) {
        if let track = trackedNames[name] {
            track.count += 1
            if track.known { done(.success(())) } else { track.waiters.append(done) }
            return
        }
        trackedNames[name] = NameTrack(waiters: [done])
        addMatch(nameOwnerRule(name)) { [self] result in
            if case .failure(let error) = result {
                let waiters = trackedNames.removeValue(forKey: name)?.waiters ?? []
                for waiter in waiters { waiter(.failure(error)) }
                return
            }
            callBus("GetNameOwner", [.string(name)]) { [self] reply in
                guard let track = trackedNames[name] else { return }
                if !track.known, case .success(let message) = reply, case .string(let owner)? = message.body.first {
                    track.owner = owner
                }
                // NameHasNoOwner (or any failure) leaves the owner unknown-as-absent: nothing matches until
                // NameOwnerChanged announces one.
                track.known = true
                let waiters = track.waiters
                track.waiters = []
                for waiter in waiters { waiter(.success(())) }
            }
        }
    }

    private func untrackName(_ name: String) {
        guard let track = trackedNames[name] else { return }
        track.count -= 1
        if track.count > 0 { return }
        trackedNames[name] = nil
        removeMatch(nameOwnerRule(name))
    }
}
