// SPDX-License-Identifier: Apache-2.0

/// Where the signals of one subscription go: called on the loop thread.
struct SignalSink: Sendable {
    /// Takes one signal.
    let deliver: @Sendable (DBusMessage) -> Void
    /// Called once when the subscription ends with the connection (or the rule fails).
    let finish: @Sendable () -> Void
}

/// One match rule and the subscriptions that share it, on the loop thread.
struct RuleState {
    let rule: MatchRule
    var subscribers: [UInt64: SignalSink] = [:]
    /// Whether the bus has confirmed the rule (AddMatch replied).
    var ready = false
    /// Subscribers waiting for the rule to become active.
    var waiters: [(Result<Void, DBusError>) -> Void] = []
}

/// The owner of a well-known name that sender-restricted rules refer to, kept current from `NameOwnerChanged`.
struct NameTrack {
    var count = 1
    var owner: String?
    var known = false
    var waiters: [(Result<Void, DBusError>) -> Void] = []
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
        if var state = rules[key] {
            state.subscribers[id] = sink
            if state.ready { done(.success(())) } else { state.waiters.append(done) }
            rules[key] = state
            return
        }
        var state = RuleState(rule: rule)
        state.subscribers[id] = sink
        state.waiters.append(done)
        rules[key] = state
        guard isBusConnection else {
            ruleActivated(key, .success(()), tracked: false)
            return
        }
        let activate = { [self] in
            addMatch(key) { [self] result in ruleActivated(key, result, tracked: rule.trackedSenderName != nil) }
        }
        if let name = rule.trackedSenderName {
            trackName(name) { [self] result in
                switch result {
                case .success: activate()
                case .failure(let error): ruleActivated(key, .failure(error), tracked: false)
                }
            }
        } else {
            activate()
        }
    }

    private func ruleActivated(_ key: String, _ result: Result<Void, DBusError>, tracked: Bool) {
        guard var state = rules[key] else { return }
        let waiters = state.waiters
        state.waiters = []
        switch result {
        case .success:
            state.ready = true
            rules[key] = state
            if state.subscribers.isEmpty { dropRule(key) }
            for waiter in waiters { waiter(.success(())) }
        case .failure(let error):
            rules[key] = nil
            if tracked, let name = state.rule.trackedSenderName { untrackName(name) }
            for waiter in waiters { waiter(.failure(error)) }
            for sink in state.subscribers.values { sink.finish() }
        }
    }

    /// Removes a stream; the last one to leave an active rule removes the rule from the bus.
    func unsubscribe(_ key: String, id: UInt64) {
        guard var state = rules[key], state.subscribers.removeValue(forKey: id) != nil else { return }
        rules[key] = state
        if state.subscribers.isEmpty && state.ready { dropRule(key) }
    }

    private func dropRule(_ key: String) {
        guard let state = rules.removeValue(forKey: key) else { return }
        guard isBusConnection else { return }
        removeMatch(key)
        if let name = state.rule.trackedSenderName { untrackName(name) }
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
            case .string(let name) = message.body[0], case .string(let newOwner) = message.body[2],
            trackedNames[name] != nil
        {
            trackedNames[name]!.owner = newOwner.isEmpty ? nil : newOwner
            trackedNames[name]!.known = true
        }
        for state in rules.values where state.rule.matchesIgnoringSender(message) && senderMatches(state.rule, message) {
            for sink in state.subscribers.values { sink.deliver(message) }
        }
    }

    private func senderMatches(_ rule: MatchRule, _ message: DBusMessage) -> Bool {
        guard let sender = rule.sender else { return true }
        guard let actual = message.sender?.rawValue else { return false }
        if let tracked = rule.trackedSenderName {
            guard let track = trackedNames[tracked], track.known, let owner = track.owner else { return false }
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
        if var track = trackedNames[name] {
            track.count += 1
            if track.known { done(.success(())) } else { track.waiters.append(done) }
            trackedNames[name] = track
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
                guard var track = trackedNames[name] else { return }
                if !track.known, case .success(let message) = reply, case .string(let owner)? = message.body.first {
                    track.owner = owner
                }
                // NameHasNoOwner (or any failure) leaves the owner unknown-as-absent: nothing matches until
                // NameOwnerChanged announces one.
                track.known = true
                let waiters = track.waiters
                track.waiters = []
                trackedNames[name] = track
                for waiter in waiters { waiter(.success(())) }
            }
        }
    }

    private func untrackName(_ name: String) {
        guard var track = trackedNames[name] else { return }
        track.count -= 1
        if track.count > 0 {
            trackedNames[name] = track
            return
        }
        trackedNames[name] = nil
        removeMatch(nameOwnerRule(name))
    }
}
