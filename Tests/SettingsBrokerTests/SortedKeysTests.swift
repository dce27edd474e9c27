// SPDX-License-Identifier: Apache-2.0

@testable import SettingsBroker
import SettingsBusTesting
import Testing

/// The broker's ordered index of keys (``SortedKeys``), against a sorted array, through random operations.
struct SortedKeysTests {
    /// A small deterministic generator, so that a failure can be replayed.
    typealias Generator = SeededGenerator

    /// Texts that share prefixes and cross the bytes around `/` (`-`, `.`, `/`, `0`).
    static func randomKey(_ random: inout Generator) -> String {
        let segments = ["a", "b", "b-", "b.", "b0", "bc", "c"]
        var text = ""
        for _ in 0...Int.random(in: 0...2, using: &random) {
            text += "/" + segments.randomElement(using: &random)!
        }
        return text + "/k\(Int.random(in: 0..<40, using: &random))"
    }

    static func check(_ keys: SortedKeys, _ model: [String], _ random: inout Generator) {
        #expect(keys.checkInvariants() == nil)
        #expect(keys.count == model.count)
        #expect(Array(keys) == model)
        for _ in 0..<8 {
            let probe = Self.randomKey(&random)
            let lower = model.firstIndex { $0 >= probe } ?? model.count
            let upper = model.firstIndex { $0 > probe } ?? model.count
            let notBefore = keys.firstIndex(notBefore: probe)
            let after = keys.firstIndex(after: probe)
            #expect(keys.distance(from: keys.startIndex, to: notBefore) == lower)
            #expect(keys.distance(from: keys.startIndex, to: after) == upper)
            #expect(keys.contains(probe) == model.contains(probe))
        }
    }

    @Test(arguments: [4, 5, 8, 64])
    func randomOperationsKeepTheKeysInOrder(chunkCapacity: Int) {
        var random = Generator(state: UInt64(chunkCapacity))
        var keys = SortedKeys(chunkCapacity: chunkCapacity)
        var model: [String] = []
        for round in 0..<3000 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5:
                let key = Self.randomKey(&random)
                #expect(keys.insert(key) == !model.contains(key))
                if !model.contains(key) { model.append(key); model.sort() }
            case 5..<8:
                let key = model.isEmpty || Bool.random(using: &random) ? Self.randomKey(&random) : model.randomElement(using: &random)!
                #expect(keys.remove(key) == model.contains(key))
                model.removeAll { $0 == key }
            default:
                // A batch in order, as a commit applies it: some keys present, some not, some large runs.
                var insertions = Set<String>(), removals = Set<String>()
                for _ in 0..<Int.random(in: 0..<60, using: &random) {
                    let key = Self.randomKey(&random)
                    if Bool.random(using: &random) { insertions.insert(key) } else { removals.insert(key) }
                }
                if Int.random(in: 0..<4, using: &random) == 0 {
                    // A whole directory reset, as a `Reset` of it does.
                    let prefix = ["/a/", "/b/", "/b-/", "/c/"].randomElement(using: &random)!
                    removals.formUnion(model.filter { $0.hasPrefix(prefix) })
                }
                insertions.subtract(removals)
                keys.apply(inserting: insertions.sorted(), removing: removals.sorted())
                model = Set(model).union(insertions).subtracting(removals).sorted()
            }
            if round % 50 == 0 || round == 2999 { Self.check(keys, model, &random) }
        }
        // Emptied in a batch, then refilled.
        keys.apply(inserting: [], removing: model)
        #expect(keys.isEmpty && keys.checkInvariants() == nil)
        let refill = (0..<300).map { "/r/k\($0)" }.sorted()
        keys.apply(inserting: refill, removing: [])
        Self.check(keys, refill, &random)
    }

    @Test func keysLoadedInOrderFillTheirChunks() {
        var keys = SortedKeys(chunkCapacity: 512)
        for index in 0..<100_000 {
            let digits = String(index)
            keys.insert("/bench/k" + String(repeating: "0", count: 6 - digits.count) + digits)
        }
        #expect(keys.count == 100_000)
        #expect(keys.chunkCount == (100_000 + 511) / 512)
        #expect(keys.checkInvariants() == nil)
        // A key inserted into a full chunk splits it in two halves.
        keys.insert("/bench/k000000x")
        #expect(keys.chunkCount == (100_000 + 511) / 512 + 1)
        #expect(keys.checkInvariants() == nil)
    }

    @Test func aDirectoryIsTheRangeUpToItsTextWithZeroForTheSlash() throws {
        var keys = SortedKeys(chunkCapacity: 4)
        let texts = ["/a/b", "/a/b-", "/a/b.", "/a/b/c", "/a/b/d/e", "/a/b0", "/a/bc", "/a/c"]
        for text in texts.shuffled() { keys.insert(text) }
        let start = keys.firstIndex(notBefore: "/a/b/")
        let end = keys.firstIndex(notBefore: "/a/b0")
        #expect(Array(keys[start..<end]) == ["/a/b/c", "/a/b/d/e"])
    }
}
