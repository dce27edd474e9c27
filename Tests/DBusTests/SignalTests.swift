// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsBusTesting
import Testing
import TestMachine

/// Signal streams receive exactly what their match rule selects, from binding and tool peers, and a rule
/// naming a well-known sender rejects forged signals.
@Suite(.sharingTheMachine, .timeLimit(.minutes(2)))
struct SignalTests {
    static let interface: InterfaceName = "org.example.Sig1"

    /// One signal a test emits: its path, member and first argument; the second argument is its label.
    struct Emission: Sendable, CustomTestStringConvertible {
        var label: String
        var path: ObjectPath = "/org/example/Sig"
        var interface: InterfaceName = SignalTests.interface
        var member: MemberName = "Hit"
        var arg0: DBusValue = .string("x")

        var testDescription: String { label }
    }

    /// A rule under test, what to emit, and the labels the rule's stream must receive (before the sentinel).
    struct FilterCase: Sendable, CustomTestStringConvertible {
        var name: String
        var rule: MatchRule
        var emissions: [Emission]
        var expected: [String]
        var sentinel: Emission

        var testDescription: String { name }
    }

    static var filterCases: [FilterCase] {
        var cases: [FilterCase] = []
        cases.append(FilterCase(
            name: "member", rule: MatchRule(interface: interface, member: "Hit"),
            emissions: [Emission(label: "miss", member: "Miss"), Emission(label: "hit"), Emission(label: "other", member: "Hits")],
            expected: ["hit"], sentinel: Emission(label: "sentinel")))
        cases.append(FilterCase(
            name: "interface", rule: MatchRule(interface: "org.example.Sig2"),
            emissions: [Emission(label: "one"), Emission(label: "two", interface: "org.example.Sig2"),
                        Emission(label: "three", interface: "org.example.Sig")],
            expected: ["two"], sentinel: Emission(label: "sentinel", interface: "org.example.Sig2")))
        cases.append(FilterCase(
            name: "path", rule: MatchRule(interface: interface, path: "/a/b"),
            emissions: ["/a", "/a/b/c", "/a/bc", "/a/b", "/"].map { Emission(label: $0, path: ObjectPath(stringLiteral: $0)) },
            expected: ["/a/b"], sentinel: Emission(label: "sentinel", path: "/a/b")))
        cases.append(FilterCase(
            name: "path_namespace", rule: MatchRule(interface: interface, pathNamespace: "/a/b"),
            emissions: ["/a", "/a/b", "/a/b/c", "/a/bc", "/a/b/c/d", "/x", "/"].map {
                Emission(label: $0, path: ObjectPath(stringLiteral: $0))
            },
            expected: ["/a/b", "/a/b/c", "/a/b/c/d"], sentinel: Emission(label: "sentinel", path: "/a/b")))
        var arg0 = MatchRule(interface: interface)
        arg0.arguments[0] = "x"
        cases.append(FilterCase(
            name: "arg0", rule: arg0,
            emissions: [Emission(label: "x"), Emission(label: "xy", arg0: .string("xy")), Emission(label: "X", arg0: .string("X")),
                        Emission(label: "int", arg0: .int32(1)), Emission(label: "x again")],
            expected: ["x", "x again"], sentinel: Emission(label: "sentinel")))
        var quoted = MatchRule(interface: interface)
        quoted.arguments[0] = #"it's a \ back, 'slash'"#
        cases.append(FilterCase(
            name: "arg0 with apostrophes, a backslash and a comma", rule: quoted,
            emissions: [#"it's a \ back, 'slash'"#, #"its a \ back, slash"#, #"it's a \\ back, 'slash'"#, "it"].map {
                Emission(label: $0, arg0: .string($0))
            },
            expected: [#"it's a \ back, 'slash'"#], sentinel: Emission(label: "sentinel", arg0: .string(#"it's a \ back, 'slash'"#))))
        var arg0path = MatchRule(interface: interface)
        arg0path.argumentPaths[0] = "/a/b"
        let pathArguments = ["/a/b", "/a/", "/", "/a", "/a/b/", "/a/b/c", "/a/bc", "/ab"]
        cases.append(FilterCase(
            name: "arg0path without trailing slash", rule: arg0path,
            emissions: pathArguments.map { Emission(label: $0, arg0: .string($0)) }
                + [Emission(label: "path /a/b", arg0: .objectPath("/a/b")), Emission(label: "path /a/b/c", arg0: .objectPath("/a/b/c"))],
            expected: ["/a/b", "/a/", "/", "path /a/b"], sentinel: Emission(label: "sentinel", arg0: .string("/a/b"))))
        var arg0dir = MatchRule(interface: interface)
        arg0dir.argumentPaths[0] = "/a/"
        cases.append(FilterCase(
            name: "arg0path with trailing slash", rule: arg0dir,
            emissions: pathArguments.map { Emission(label: $0, arg0: .string($0)) }
                + [Emission(label: "path /a/b", arg0: .objectPath("/a/b")), Emission(label: "path /a", arg0: .objectPath("/a"))],
            expected: ["/a/b", "/a/", "/", "/a/b/", "/a/b/c", "/a/bc", "path /a/b"],
            sentinel: Emission(label: "sentinel", arg0: .string("/a/"))))
        var namespace = MatchRule(interface: interface)
        namespace.arg0Namespace = "org.example"
        cases.append(FilterCase(
            name: "arg0namespace", rule: namespace,
            emissions: ["org.example", "org.example.Foo", "org.examples", "org", "org.example.Foo.Bar", "com.example"].map {
                Emission(label: $0, arg0: .string($0))
            },
            expected: ["org.example", "org.example.Foo", "org.example.Foo.Bar"],
            sentinel: Emission(label: "sentinel", arg0: .string("org.example"))))
        return cases
    }

    static func emit(_ emission: Emission, from connection: DBusConnection) throws {
        try connection.emitSignal(
            path: emission.path, interface: emission.interface, member: emission.member,
            arguments: [emission.arg0, .string(emission.label)])
    }

    /// The labels (second arguments) a stream yields up to and including `sentinel`.
    static func labels(
        _ iterator: inout DBusSignalStream.AsyncIterator, through sentinel: String = "sentinel"
    ) async throws -> [String] {
        var labels: [String] = []
        while true {
            let signal = try #require(await iterator.next(), "the stream ended before \(sentinel); got \(labels)")
            guard signal.body.count >= 2, case .string(let label) = signal.body[1] else {
                labels.append("?\(signal.body)")
                continue
            }
            labels.append(label)
            if label == sentinel { return labels }
        }
    }

    // MARK: - Rules

    @Test(arguments: filterCases)
    func streamReceivesOnlyWhatItsRuleMatches(_ filter: FilterCase) async throws {
        try await withTestBus { bus in
            let sender = try await bus.connect()
            let receiver = try await bus.connect()
            // Given a stream with the rule, and a witness stream that receives everything the sender emits.
            let filtered = try await receiver.signals(matching: filter.rule)
            let witness = try await receiver.signals(matching: MatchRule(sender: sender.uniqueName))
            let watchdog = closing(receiver)
            // When the sender emits signals that do not match, some that do, then the sentinel.
            for emission in filter.emissions + [filter.sentinel] { try Self.emit(emission, from: sender) }
            // Then the stream yields exactly the matching ones, while the witness saw them all.
            var witnessed = witness.makeAsyncIterator()
            #expect(try await Self.labels(&witnessed) == filter.emissions.map(\.label) + ["sentinel"])
            var iterator = filtered.makeAsyncIterator()
            #expect(try await Self.labels(&iterator) == filter.expected + ["sentinel"])
            watchdog.cancel()
            await sender.close()
            await receiver.close()
        }
    }

    @Test func streamsSharingARuleBothReceiveAndTheRuleLeavesTheBusWithTheLast() async throws {
        try await withTestBus { bus in
            let sender = try await bus.connect()
            let receiver = try await bus.connect()
            let receiverName = try #require(receiver.uniqueName).rawValue
            let rule = MatchRule(interface: Self.interface, member: "Hit")
            let before = try await Self.matchRules(of: receiverName, on: sender)
            do {
                // Given two streams with the same rule.
                let first = try await receiver.signals(matching: rule)
                let second = try await receiver.signals(matching: rule)
                // Then the bus holds the rule once.
                let during = try await Self.matchRules(of: receiverName, on: sender)
                #expect(during.filter { $0 == Self.normalized(rule.text) }.count == 1, "\(during)")
                // When signals are emitted, both streams receive them all.
                let watchdog = closing(receiver)
                for label in ["a", "b", "sentinel"] { try Self.emit(Emission(label: label), from: sender) }
                var one = first.makeAsyncIterator(), two = second.makeAsyncIterator()
                #expect(try await Self.labels(&one) == ["a", "b", "sentinel"])
                #expect(try await Self.labels(&two) == ["a", "b", "sentinel"])
                watchdog.cancel()
                // When the first stream ends, the rule stays for the second.
                _ = consume one
                _ = consume first
                _ = try await receiver.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                    member: "GetId")
                let remaining = try await Self.matchRules(of: receiverName, on: sender)
                #expect(remaining.filter { $0 == Self.normalized(rule.text) }.count == 1)
                _ = consume two
                _ = consume second
            }
            // When the last stream has ended, the rule is removed: RemoveMatch is queued before this round trip.
            _ = try await receiver.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId")
            #expect(try await Self.matchRules(of: receiverName, on: sender) == before)
            // And a new stream with the same rule receives signals again.
            let again = try await receiver.signals(matching: rule)
            let watchdog = closing(receiver)
            try Self.emit(Emission(label: "sentinel"), from: sender)
            var iterator = again.makeAsyncIterator()
            #expect(try await Self.labels(&iterator) == ["sentinel"])
            watchdog.cancel()
            await sender.close()
            await receiver.close()
        }
    }

    /// `forwardSignals` hands each signal to its handler on the connection's thread, stops at `end()` and
    /// leaves the bus without its rule, and reports the connection closing.
    @Test func forwardedSignalsReachTheHandlerOutsideAnyTaskUntilTheSubscriptionEnds() async throws {
        try await withTestBus { bus in
            let sender = try await bus.connect()
            let receiver = try await bus.connect()
            let receiverName = try #require(receiver.uniqueName).rawValue
            let rule = MatchRule(interface: Self.interface, member: "Hit")
            let before = try await Self.matchRules(of: receiverName, on: sender)
            let received = Mailbox<(label: String, inTask: Bool)>()
            let ended = Mailbox<Bool>()
            let subscription = try await receiver.forwardSignals(
                matching: rule,
                to: { message in
                    guard case .string(let label)? = message.body.last else { return }
                    received.push((label, withUnsafeCurrentTask { $0 != nil }))
                },
                ended: { ended.push(true) })
            for label in ["a", "b"] { try Self.emit(Emission(label: label), from: sender) }
            guard case .element(let first) = await received.next(timeLimit: .seconds(20)),
                case .element(let second) = await received.next(timeLimit: .seconds(20))
            else {
                Issue.record("the handler did not get both signals")
                return
            }
            #expect([first.label, second.label] == ["a", "b"])
            #expect(!first.inTask && !second.inTask)

            // After end(), the rule leaves the bus (RemoveMatch is queued before this round trip).
            subscription.end()
            _ = try await receiver.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId")
            #expect(try await Self.matchRules(of: receiverName, on: sender) == before)

            // A second subscription is told when the connection closes.
            let last = try await receiver.forwardSignals(matching: rule, to: { _ in }, ended: { ended.push(true) })
            await receiver.close()
            guard case .element = await ended.next(timeLimit: .seconds(20)) else {
                Issue.record("closing the connection did not end the subscription")
                return
            }
            last.end()
            await sender.close()
        }
    }

    @Test func cancellingTheConsumingTaskRemovesTheRule() async throws {
        try await withTestBus { bus in
            let receiver = try await bus.connect()
            let observer = try await bus.connect()
            let receiverName = try #require(receiver.uniqueName).rawValue
            let before = try await Self.matchRules(of: receiverName, on: observer)
            let rule = MatchRule(sender: "org.example.Real", interface: Self.interface, member: "Hit")
            let stream = try await receiver.signals(matching: rule)
            let during = try await Self.matchRules(of: receiverName, on: observer)
            #expect(during.contains(Self.normalized(rule.text)), "\(during)")
            // A rule naming a well-known sender also follows that name's owner.
            #expect(during.contains { $0.contains("NameOwnerChanged") && $0.contains("arg0='org.example.Real'") }, "\(during)")
            let started = Fixtures.Signal()
            let consumer = Task {
                started.fire()
                for await _ in stream {}
            }
            await started.wait()
            consumer.cancel()
            await consumer.value
            _ = try await receiver.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId")
            #expect(try await Self.matchRules(of: receiverName, on: observer) == before)
            await observer.close()
            await receiver.close()
        }
    }

    @Test func ruleTheBusRefusesFailsTheSubscriptionAndLeavesNoRuleBehind() async throws {
        try await withTestBus { bus in
            let receiver = try await bus.connect()
            let observer = try await bus.connect()
            let receiverName = try #require(receiver.uniqueName).rawValue
            let before = try await Self.matchRules(of: receiverName, on: observer)
            // Checked locally.
            var local = MatchRule(interface: Self.interface)
            local.argumentPaths[64] = "/a"
            let localError = await #expect(throws: DBusError.self) { _ = try await receiver.signals(matching: local) }
            #expect(localError?.name == .matchRuleInvalid)
            // Checked by the bus, for a plain rule and for one that also follows a well-known sender.
            for sender: BusName? in [nil, "org.example.Real"] {
                var rule = MatchRule(sender: sender, interface: Self.interface)
                rule.arg0Namespace = "not..a.namespace"
                let error = await #expect(throws: DBusError.self) { _ = try await receiver.signals(matching: rule) }
                #expect(error?.name == .matchRuleInvalid, "\(String(describing: error))")
            }
            _ = try await receiver.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId")
            #expect(try await Self.matchRules(of: receiverName, on: observer) == before)
            // The connection still subscribes and receives.
            let stream = try await receiver.signals(matching: MatchRule(interface: Self.interface))
            let watchdog = closing(receiver)
            try Self.emit(Emission(label: "sentinel"), from: observer)
            var iterator = stream.makeAsyncIterator()
            #expect(try await Self.labels(&iterator) == ["sentinel"])
            watchdog.cancel()
            await observer.close()
            await receiver.close()
        }
    }

    @Test func reservedLocalNamesAreRefusedAndTheConnectionSurvives() async throws {
        try await withTestBus { bus in
            let connection = try await bus.connect()
            // The bus disconnects a peer that sends these, so the binding refuses them before sending.
            #expect(throws: DBusError.self) {
                try connection.emitSignal(path: "/org/example/X", interface: "org.freedesktop.DBus.Local", member: "Disconnected")
            }
            #expect(throws: DBusError.self) {
                try connection.emitSignal(path: "/org/freedesktop/DBus/Local", interface: Self.interface, member: "Hit")
            }
            await #expect(throws: DBusError.self) {
                _ = try await connection.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus/Local", interface: nil, member: "GetId")
            }
            let id = try await connection.call(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "GetId")
            #expect(id.count == 1)
            await connection.close()
        }
    }

    /// A rule's text with its `key='value'` parts sorted, since the daemon reports them in its own order (the
    /// rules in these tests have no commas inside values).
    static func normalized(_ rule: String) -> String {
        rule.split(separator: ",").sorted().joined(separator: ",")
    }

    /// The match rules the bus holds for a connection, from the daemon's `Debug.Stats` interface.
    static func matchRules(of name: String, on connection: DBusConnection) async throws -> [String] {
        let reply = try await connection.call(
            destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
            interface: "org.freedesktop.DBus.Debug.Stats", member: "GetAllMatchRules")
        guard case .dictionary(_, _, let entries)? = reply.first else { return [] }
        for entry in entries where entry.key == .string(name) {
            guard case .array(_, let rules) = entry.value else { return [] }
            return rules.compactMap { if case .string(let text) = $0 { normalized(text) } else { nil } }.sorted()
        }
        return []
    }

    // MARK: - Tool peers

    @Test func signalsFromDbusSendAndGdbusEmitAreReceived() async throws {
        try await withTestBus { bus in
            let receiver = try await bus.connect()
            let stream = try await receiver.signals(matching: MatchRule(interface: Self.interface, member: "Hit"))
            let watchdog = closing(receiver)
            let sent = try await TestProcess.run(
                Peers.dbusSend,
                ["--bus=\(bus.address)", "--type=signal", "/org/example/Tool", "org.example.Sig1.Hit", "string:from-dbus-send",
                 "uint32:7"],
                timeLimit: .seconds(30))
            #expect(sent.status == 0, "\(sent.stderr)")
            let emitted = try await TestProcess.run(
                Peers.gdbus,
                // `--session` (with the test bus as the session bus) rather than `--address`: with an address,
                // `gdbus emit` opens a peer connection that never says Hello, and the bus drops what it sends.
                ["emit", "--session", "--object-path", "/org/example/Tool", "--signal", "org.example.Sig1.Hit",
                 "'from-gdbus'", "<@a{sv} {}>"],
                environment: bus.environment, timeLimit: .seconds(30))
            #expect(emitted.status == 0, "\(emitted.stderr)")
            var iterator = stream.makeAsyncIterator()
            let first = try #require(await iterator.next())
            let second = try #require(await iterator.next())
            watchdog.cancel()
            #expect(first.path == "/org/example/Tool")
            #expect(first.body == [.string("from-dbus-send"), .uint32(7)])
            #expect(second.body == [.string("from-gdbus"), .variant(.dictionary(key: .string, value: .variant, []))])
            #expect(first.sender != second.sender)
            await receiver.close()
        }
    }

    // MARK: - Senders

    @Test func forgedSignalNeverReachesAStreamRestrictedToTheRealSender() async throws {
        try await withTestBus { bus in
            let real = try await bus.connect()
            #expect(try await real.requestName("org.example.Real") == .primaryOwner)
            let forger = try await bus.connect()
            let receiver = try await bus.connect()
            let restricted = try await receiver.signals(
                matching: MatchRule(sender: "org.example.Real", interface: Self.interface, member: "Hit"))
            let unrestricted = try await receiver.signals(matching: MatchRule(interface: Self.interface, member: "Hit"))
            let watchdog = closing(receiver)
            var witness = unrestricted.makeAsyncIterator()

            // Given a forger emitting the same interface, member and path.
            try Self.emit(Emission(label: "forged"), from: forger)
            // Then the forged signal reached this process (the unrestricted stream has it).
            #expect(try await Self.labels(&witness, through: "forged") == ["forged"])
            // When the real owner emits.
            try Self.emit(Emission(label: "real"), from: real)
            #expect(try await Self.labels(&witness, through: "real") == ["real"])
            // Then the restricted stream's first signal is the real one.
            var iterator = restricted.makeAsyncIterator()
            let first = try #require(await iterator.next())
            #expect(first.body.last == .string("real"))
            #expect(first.sender == real.uniqueName)
            watchdog.cancel()
            await real.close()
            await forger.close()
            await receiver.close()
        }
    }

    @Test func restrictedStreamFollowsTheNameToItsNewOwner() async throws {
        try await withTestBus { bus in
            let first = try await bus.connect()
            let second = try await bus.connect()
            let receiver = try await bus.connect()
            #expect(try await first.requestName("org.example.Real") == .primaryOwner)
            let restricted = try await receiver.signals(
                matching: MatchRule(sender: "org.example.Real", interface: Self.interface, member: "Hit"))
            let unrestricted = try await receiver.signals(matching: MatchRule(interface: Self.interface, member: "Hit"))
            let watchdog = closing(receiver)
            var witness = unrestricted.makeAsyncIterator()
            var iterator = restricted.makeAsyncIterator()

            // Given the first owner's signal is accepted.
            try Self.emit(Emission(label: "first while owner"), from: first)
            #expect(try await Self.labels(&iterator, through: "first while owner") == ["first while owner"])
            // When the first owner releases the name and the second takes it.
            #expect(try await first.releaseName("org.example.Real") == .released)
            try Self.emit(Emission(label: "first after release"), from: first)
            #expect(try await Self.labels(&witness, through: "first after release").last == "first after release")
            #expect(try await second.requestName("org.example.Real") == .primaryOwner)
            try Self.emit(Emission(label: "first, no longer owner"), from: first)
            #expect(try await Self.labels(&witness, through: "first, no longer owner").last == "first, no longer owner")
            try Self.emit(Emission(label: "second as owner"), from: second)
            // Then the restricted stream accepts the new owner's signal and rejected the old owner's.
            #expect(try await Self.labels(&iterator, through: "second as owner") == ["second as owner"])
            watchdog.cancel()
            await first.close()
            await second.close()
            await receiver.close()
        }
    }
}
