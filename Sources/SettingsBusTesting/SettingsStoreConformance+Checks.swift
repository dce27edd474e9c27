// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsBus
import SettingsModel

extension SettingsStoreConformance {
    /// Every check, in a stable order.
    public static let checks: [Check] = [
        Check(name: "unsetKeyReadsItsDefault") { store, dir in
            let key = SettingKey(try dir.key(named: "unset"), default: "fallback")
            try expectEqual(try await store.get(key), "fallback", "an unset key")
        },
        Check(name: "setThenGet") { store, dir in
            let key = SettingKey(try dir.key(named: "name"), default: "")
            try await store.set(key, to: "Ada")
            try expectEqual(try await store.get(key), "Ada", "after set")
            try await store.set(key, to: "Grace")
            try expectEqual(try await store.get(key), "Grace", "after a second set")
        },
        Check(name: "resetRestoresTheDefault") { store, dir in
            let key = SettingKey(try dir.key(named: "size"), default: Int32(12))
            try await store.set(key, to: 20)
            try await store.reset(key)
            try expectEqual(try await store.get(key), 12, "after reset")
        },
        Check(name: "optionalNilMeansNoValue") { store, dir in
            let key = SettingKey<String?>(try dir.key(named: "nickname"), default: nil)
            try expectEqual(try await store.get(key), nil, "an unset optional")
            try await store.set(key, to: "ace")
            try expectEqual(try await store.get(key), "ace", "after set")
            try await store.set(key, to: nil)
            try expectEqual(try await store.get(key), nil, "after setting nil")
            let snapshot = try await store.read([key.path])
            try expect(snapshot.values[key.path] == nil, "setting nil left a value: \(snapshot.values)")
        },
        Check(name: "registeredTypeIsEnforced") { store, dir in
            let key = SettingKey(try dir.key(named: "volume"), default: 0.5)
            try await store.register(key)
            try await store.set(key, to: 0.75)
            var wrong = SettingsTransaction()
            wrong.set(key.path, to: .string("loud"))
            try await expectError(.typeMismatch) { try await store.commit(wrong) }
            try expectEqual(try await store.get(key), 0.75, "the value after a refused write")
        },
        Check(name: "rangeAndChoicesAreEnforced") { store, dir in
            let volume = SettingKey(try dir.key(named: "volume"), default: UInt32(50)).range(0...100)
            let mode = SettingKey(try dir.key(named: "mode"), default: "auto").choices(["auto", "on", "off"])
            try await store.register(volume, mode)
            try await store.set(volume, to: 100)
            try await expectError(.outOfRange) { try await store.set(volume, to: 101) }
            try await store.set(mode, to: "off")
            try await expectError(.outOfRange) { try await store.set(mode, to: "sometimes") }
            try expectEqual(try await store.get(volume), 100, "volume")
            try expectEqual(try await store.get(mode), "off", "mode")
        },
        Check(name: "registrationFollowsTheRulesOfSchemaEvolution") { store, dir in
            let path = try dir.key(named: "width")
            try await store.register(SettingKey(path, default: Int32(800)))
            try await store.register(SettingKey(path, default: Int32(800)))
            // Another type is incompatible; another default is compatible.
            try await expectError(.schemaConflict) { try await store.register(SettingKey(path, default: "wide")) }
            try await store.register(SettingKey(path, default: Int32(640)))
            let description = try await store.describe(path)
            try expectEqual(description.schema?.defaultValue, .int32(640), "the new default")
            try expectEqual(try await store.get(SettingKey(path, default: Int32(0))), 640, "the new default read")
            // A range where there was none narrows the key: refused, unless replacing.
            let ranged = SettingKey(path, default: Int32(640)).range(0...1000)
            try await expectError(.schemaConflict) { try await store.register(ranged) }
            try await store.register(ranged, replacing: true)
            try expectEqual(try await store.describe(path).schema?.range, SettingRange(min: .int32(0), max: .int32(1000)), "the range")
            // A value of a narrower type that converts without loss is stored as the registered type.
            let wide = SettingKey(try dir.key(named: "wide"), default: 0)
            try await store.register(wide)
            var transaction = SettingsTransaction()
            transaction.set(wide.path, to: .int32(14))
            try await store.commit(transaction)
            try expectEqual(try await store.read([wide.path]).values[wide.path], .int64(14), "an int32 stored in an Int key")
        },
        Check(name: "registrationIsACommitThatReportsWhatItChanges") { store, dir in
            let refused = try dir.key(named: "refused")
            let narrow = try dir.key(named: "narrow")
            var raw = SettingsTransaction()
            raw.set(refused, to: .string("loud"))
            raw.set(narrow, to: .int32(14))
            try await store.commit(raw)
            let changes = Collector(store.updates(of: .directory(dir)))
            defer { changes.stop() }
            let snapshot = try await changes.next()
            // A schema that refuses the stored value: the key reads its default, and watchers hear of it.
            try await store.register(SettingKey(refused, default: Int32(5)))
            let first = try await changes.next()
            try expectEqual(first.values, [refused: .int32(5)], "the change a refusing schema made")
            try expect(first.serial > snapshot.serial, "a registration kept serial \(first.serial)")
            try expectEqual(try await store.read([refused]).serial, first.serial, "the serial after registering")
            // A stored value of a narrower type is converted in the registration's own commit.
            try await store.register(SettingKey(narrow, default: 0))
            let second = try await changes.next()
            try expectEqual(second.values, [narrow: .int64(14)], "the change a converting schema made")
            try expectEqual(try await store.describe(narrow).serial, second.serial, "the serial of the conversion")
            // A default appearing for a key without a value is not reported: the next change is a write.
            try await store.register(SettingKey(try dir.key(named: "unset"), default: "x"))
            var write = SettingsTransaction()
            write.set(refused, to: .int32(6))
            let serial = try await store.commit(write)
            let third = try await changes.next()
            try expectEqual(third.values, [refused: .int32(6)], "the change after registering an unset key")
            try expectEqual(third.serial, serial, "the serial of that change")
        },
        Check(name: "descriptionsFollowTheKeysSchema") { store, dir in
            let path = try dir.key(named: "described")
            let descriptions = Collector(store.descriptions(for: path))
            defer { descriptions.stop() }
            let first = try await descriptions.next()
            try expect(first.schema == nil && first.type == nil, "an unknown key is described as \(first)")
            try await store.register([path: SettingSchema(defaultValue: .int32(1), summary: "one")], replacing: false)
            try expectEqual(try await descriptions.next().schema?.summary, "one", "after registering")
            // An identical registration changes nothing: the next description is the next change's.
            try await store.register([path: SettingSchema(defaultValue: .int32(1), summary: "one")], replacing: false)
            try await store.set(SettingKey(path, default: Int32(1)), to: 5)
            try await store.register([path: SettingSchema(defaultValue: .int32(1), summary: "two")], replacing: false)
            let second = try await descriptions.next()
            try expectEqual(second.schema?.summary, "two", "after a new summary")
            try expectEqual(second.userValue, .int32(5), "the user value")
        },
        Check(name: "unregisterKeepsTheValueUnlessAskedToRemoveIt") { store, dir in
            let mode = SettingKey(try dir.key(named: "mode"), default: "auto").choices(["auto", "on"])
            let size = SettingKey(try dir.key(named: "size"), default: Int32(10))
            var weird = SettingsTransaction()
            weird.set(mode.path, to: .string("weird"))
            try await store.commit(weird)
            try await store.register(mode, size)
            try expectEqual(try await store.get(mode), "auto", "a stored value the choices refuse")
            let changes = Collector(store.updates(of: .directory(dir)))
            defer { changes.stop() }
            _ = try await changes.next()
            let descriptions = Collector(store.descriptions(for: mode.path))
            defer { descriptions.stop() }
            try expect(try await descriptions.next().schema != nil, "registered")
            // The kept value is served again, as it is.
            let serial = try await store.unregister(mode)
            let change = try await changes.next()
            try expectEqual(change.values, [mode.path: .string("weird")], "the change")
            try expectEqual(change.serial, serial, "the change's serial")
            try expect(try await descriptions.next().schema == nil, "the description after unregister")
            try expectEqual(try await store.read([mode.path]).values[mode.path], .string("weird"), "the kept value")
            // A key with only a default has no value any more.
            try await store.unregister(size)
            try expectEqual(try await changes.next().removed, [size.path], "the removed default")
            try await expectError(.unknownKey) { try await store.unregister(size) }
            // removingValue removes the value too.
            try await store.unregister(mode.path, removingValue: true)
            try expectEqual(try await changes.next().removed, [mode.path], "the removed value")
            try await expectError(.unknownKey) { _ = try await store.describe(mode.path) }
        },
        Check(name: "anOptionalKeyWithANilDefaultRegistersWithoutADefault") { store, dir in
            let home = SettingKey<URL?>(try dir.key(named: "home"), default: nil)
            let nickname = SettingKey<String?>(try dir.key(named: "nickname"), default: nil)
            try await store.register(home, nickname)
            try expectEqual(try await store.get(home), nil, "an unset key without a default")
            let described = try await store.describe(nickname)
            try expect(described.schema != nil && described.schema?.defaultValue == nil, "described as \(described)")
            try expectEqual(described.type, .string, "the registered type")
            try expectEqual(try await store.read([nickname.path]).values[nickname.path], nil, "no value")
            try await store.set(nickname, to: "ace")
            try expectEqual(try await store.get(nickname), "ace", "after set")
            var wrong = SettingsTransaction()
            wrong.set(nickname.path, to: .int32(1))
            try await expectError(.typeMismatch) { try await store.commit(wrong) }
            // A default added later is a compatible change.
            try await store.register([nickname.path: SettingSchema(defaultValue: .string("none"))], replacing: false)
            try await store.reset(nickname)
            try expectEqual(try await store.get(nickname), "none", "the default added")
        },
        Check(name: "transactionIsAtomic") { store, dir in
            let good = SettingKey(try dir.key(named: "good"), default: 0)
            let bad = SettingKey(try dir.key(named: "bad"), default: Int32(0)).range(0...10)
            try await store.register(bad)
            // The raw updates start with a snapshot: once it is there, the watch is live.
            let changes = Collector(store.updates(of: .directory(dir)))
            defer { changes.stop() }
            try expectEqual(try await changes.next().kind, .snapshot, "the first update")
            try await expectError(.outOfRange) {
                _ = try await store.transaction { transaction throws(SettingsError) in
                    try transaction.set(good, to: 5)
                    try transaction.set(bad, to: 11)
                }
            }
            try expectEqual(try await store.get(good), 0, "a key of a refused transaction")
            // The next commit is the first change the watcher sees: the refused one sent nothing.
            let serial = try await store.transaction { transaction throws(SettingsError) in
                try transaction.set(good, to: 6)
                try transaction.set(bad, to: 7)
            }
            let update = try await changes.next()
            try expectEqual(update.serial, serial, "the first change seen")
            try expectEqual(update.values[good.path], .int64(6), "good in the change")
            try expectEqual(update.values[bad.path], .int32(7), "bad in the change")
        },
        Check(name: "compareAndSetReportsConflict") { store, dir in
            let key = SettingKey(try dir.key(named: "counter"), default: 0)
            let first = try await store.read([key.path]).serial
            try await store.set(key, to: 1)
            var stale = SettingsTransaction(ifSerial: first)
            try stale.set(key, to: 100)
            try await expectError(.conflict) { try await store.commit(stale) }
            try expectEqual(try await store.get(key), 1, "after a refused compare-and-set")
            var fresh = SettingsTransaction(ifSerial: try await store.read([key.path]).serial)
            try fresh.set(key, to: 2)
            try await store.commit(fresh)
            try expectEqual(try await store.get(key), 2, "after a compare-and-set that held")
        },
        Check(name: "concurrentUpdatesCountExactly") { store, dir in
            let key = SettingKey(try dir.key(named: "count"), default: 0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        for _ in 0..<25 { try await store.update(key) { $0 += 1 } }
                    }
                }
                try await group.waitForAll()
            }
            try expectEqual(try await store.get(key), 100, "4 writers × 25 increments")
        },
        Check(name: "resettingADirectoryIsRecursive") { store, dir in
            let top = SettingKey(try dir.key(named: "top"), default: "")
            let deep = SettingKey(try dir.subdirectory(named: "a").subdirectory(named: "b").key(named: "deep"), default: "")
            let outside = SettingKey(try SettingDirectory(dir.rawValue.dropLast() + "-outside/").key(named: "x"), default: "")
            try await store.set(top, to: "1")
            try await store.set(deep, to: "2")
            try await store.set(outside, to: "3")
            try await store.reset(dir)
            try expectEqual(try await store.get(top), "", "top after reset")
            try expectEqual(try await store.get(deep), "", "deep after reset")
            try expectEqual(try await store.get(outside), "3", "a key outside the directory")
        },
        Check(name: "listAndReadTree") { store, dir in
            let a = SettingKey(try dir.key(named: "a"), default: 0)
            let b = SettingKey(try dir.subdirectory(named: "sub").key(named: "b"), default: "")
            try await store.set(a, to: 1)
            try await store.set(b, to: "x")
            try expectEqual(try await store.list(dir), ["a", "sub/"], "list")
            let tree = try await store.readTree(dir)
            try expectEqual(tree.values, [a.path: .int64(1), b.path: .string("x")], "readTree")
        },
        Check(name: "valuesYieldsTheCurrentValueThenEachChange") { store, dir in
            let key = SettingKey(try dir.key(named: "theme"), default: "light")
            try await store.set(key, to: "dark")
            let values = Collector(store.values(for: key))
            defer { values.stop() }
            try expectEqual(try await values.next(), "dark", "the first value")
            try await store.set(key, to: "blue")
            try expectEqual(try await values.next(), "blue", "after a change")
            try await store.reset(key)
            try expectEqual(try await values.next(), "light", "after reset")
        },
        Check(name: "valuesDoesNotRepeatAValueItJustYielded") { store, dir in
            let key = SettingKey(try dir.key(named: "mode"), default: "light")
            try await store.set(key, to: "dark")
            let values = Collector(store.values(for: key))
            defer { values.stop() }
            try expectEqual(try await values.next(), "dark", "the first value")
            // Writes of the value it has, then a reset to the default it has not: only the reset is yielded.
            try await store.set(key, to: "dark")
            try await store.set(key, to: "dark")
            try await store.reset(key)
            try expectEqual(try await values.next(), "light", "after writes of the same value and a reset")
            try await store.set(key, to: "light")
            try await store.set(key, to: "blue")
            try expectEqual(try await values.next(), "blue", "after a write of the default and a change")
        },
        Check(name: "valuesOfSeveralKeysComeAsTuples") { store, dir in
            let theme = SettingKey(try dir.key(named: "theme"), default: "light")
            let size = SettingKey(try dir.key(named: "size"), default: 11)
            let bold = SettingKey(try dir.key(named: "bold"), default: false)
            try await store.set(size, to: 14)
            let tuples = Collector(store.values(for: theme, size, bold))
            defer { tuples.stop() }
            func expectTuple(_ tuple: (String, Int, Bool), _ expected: (String, Int, Bool), _ what: String) throws {
                try expect(tuple == expected, "\(what): expected \(expected), got \(tuple)")
            }
            try expectTuple(try await tuples.next(), ("light", 14, false), "the first tuple")
            try await store.set(theme, to: "dark")
            try expectTuple(try await tuples.next(), ("dark", 14, false), "after the theme changed")
            try await store.set(size, to: 14)
            try await store.set(bold, to: true)
            try expectTuple(try await tuples.next(), ("dark", 14, true), "after a write of the same size, then bold")
            try await store.reset(size)
            try expectTuple(try await tuples.next(), ("dark", 11, true), "after the size was reset")
        },
        Check(name: "changesReportSetAndResetWithTheirOrigin") { store, dir in
            let key = SettingKey(try dir.key(named: "flag"), default: false)
            let changes = Collector(store.changes(for: key))
            defer { changes.stop() }
            // A value written before the stream has surely subscribed may be reported or not; start after it.
            let values = Collector(store.values(for: key))
            _ = try await values.next()
            values.stop()
            let serial = try await store.set(key, to: true)
            let set = try await changes.next(where: { $0.serial >= serial })
            try expectEqual(set.kind, .set, "the kind of a set")
            try expectEqual(set.value, true, "the value of a set")
            try expect(set.origin?.isEmpty == false, "a change without origin")
            try await store.reset(key)
            let reset = try await changes.next()
            try expectEqual(reset.kind, .reset, "the kind of a reset")
            try expectEqual(reset.value, false, "a reset reads the default")
        },
        Check(name: "changesKeepTheNewest128ForAConsumerThatFallsBehind") { store, dir in
            let key = SettingKey(try dir.key(named: "counter"), default: 0)
            try await store.set(key, to: 0)
            let changes = store.changes(for: key)
            defer { changes.stop() }
            // The stream is live once a stream of the same key has its first value (they share the watch).
            let values = Collector(store.values(for: key))
            defer { values.stop() }
            _ = try await values.next()
            for count in 1...200 { try await store.set(key, to: count) }
            // Every stream of the watch is handed an update at once: when this one has the last, so has `changes`.
            _ = try await values.next(where: { $0 == 200 })
            // Nothing has taken from `changes` yet; only now does a consumer start.
            let taken = Collector(changes)
            defer { taken.stop() }
            var received: [Int] = []
            for _ in 0..<128 { received.append(try await taken.next().value) }
            try expectEqual(received, Array(73...200), "the changes kept for a consumer that fell behind")
            try await store.set(key, to: 201)
            try expectEqual(try await taken.next().value, 201, "the change after them")
            changes.stop()
            try expect(await taken.ends(), "the stream went on after stop()")
        },
        Check(name: "changesUnderADirectoryReportEachCommitBelowIt") { store, dir in
            let a = SettingKey(try dir.key(named: "a"), default: 0)
            let b = SettingKey(try dir.subdirectory(named: "sub").key(named: "b"), default: "")
            let outside = SettingKey(try SettingDirectory(dir.rawValue.dropLast() + "-other/").key(named: "c"), default: 0)
            // A watch of the directory that has delivered its snapshot is live; streams of the same
            // directory made after it share it.
            let live = Collector(store.updates(of: .directory(dir)))
            defer { live.stop() }
            _ = try await live.next()
            let changes = Collector(store.changes(under: dir))
            defer { changes.stop() }
            try await store.set(outside, to: 1)
            let serial = try await store.transaction { transaction throws(SettingsError) in
                try transaction.set(a, to: 1)
                try transaction.set(b, to: "x")
            }
            let update = try await changes.next()
            try expectEqual(update.serial, serial, "the serial of the change")
            try expectEqual(update.values, [a.path: .int64(1), b.path: .string("x")], "the values of the change")
            try await store.reset(dir)
            let reset = try await changes.next()
            try expectEqual(reset.removed, [a.path, b.path], "the keys a directory reset removed")
        },
        Check(name: "aValueOfTheWrongTypeReadsTheDefault") { store, dir in
            let key = SettingKey(try dir.key(named: "count"), default: 7)
            var raw = SettingsTransaction()
            raw.set(key.path, to: .string("seven"))
            try await store.commit(raw)
            try expectEqual(try await store.get(key), 7, "a string read as Int")
            let description = try await store.describe(key)
            try expect(description.problem != nil, "describe says nothing of the mismatch")
        },
        Check(name: "oversizedValuesAreRefused") { store, dir in
            let key = SettingKey(try dir.key(named: "blob"), default: Data())
            try await expectError(.tooLarge) {
                try await store.set(key, to: Data(repeating: 1, count: SettingsBusNames.maximumValueSize + 1))
            }
            try expectEqual(try await store.read([key.path]).values[key.path], nil, "after a refused value")
        },
        Check(name: "everyRepresentationRoundTrips") { store, dir in
            try await RepresentationSamples.roundTripAll(through: store, under: dir)
        },
        Check(name: "aStreamEndsWhenItsTaskIsCancelled") { store, dir in
            let key = SettingKey(try dir.key(named: "x"), default: 0)
            let values = Collector(store.values(for: key))
            _ = try await values.next()
            values.stop()
            try expect(await values.ends(), "the stream did not end after its task was cancelled")
        },
        Check(name: "aWatchedKeyIsReadLocallyAndReadsItsOwnWrites") { store, dir in
            let key = SettingKey(try dir.key(named: "watched"), default: 0)
            let values = Collector(store.values(for: key))
            defer { values.stop() }
            _ = try await values.next()
            try expect(store.cached(key) == 0, "a watched key is not in the local copy")
            for value in 1...20 {
                try await store.set(key, to: value)
                try expectEqual(try await store.get(key), value, "a read right after a write")
            }
        },
    ]
}
