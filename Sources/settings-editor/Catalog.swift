// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import Glibc
import SettingsBus
import SettingsModel

/// What the editor knows of the whole store, for the tree's key counts and for search: every key with a value
/// (one `ReadTree` of `/`, kept current by the `Changed` signals of one watch of `/`), and each key's summary,
/// description and whether a user value differs from the default (a `Describe` of each key, read in the
/// background and again when the key changes).
///
/// The broker stays the judge of everything: the catalog is an index for finding keys, and each page the
/// editor serves about a key or directory is read from the broker when it is asked for.
actor Catalog {
    /// What a `Describe` said of one key that search and the Modified only filter use.
    struct Entry: Sendable {
        /// Whether the key has a user value that differs from its default.
        var isModified: Bool
        /// The key's summary.
        var summary: String?
        /// Whether the key is secret: its value leaves the editor only through Reveal.
        var isSecret: Bool
    }

    /// A change the page is told of: the effective values as text, the keys left without a value, and the
    /// keys whose value is not sent (a secret key's, or a key not yet described and so not known not to be
    /// secret), which the page reads again through the API if it shows them.
    struct Change: Sendable {
        /// The commit's serial.
        var serial: UInt64
        /// The JSON line sent to the pages,
        /// `{"serial":…,"values":{key:{text,plain}},"removed":[…],"withheld":[…],"resync":…}`.
        var json: String
    }

    /// The most `Describe` calls in flight while the catalog describes the store.
    static let describesInFlight = 32
    /// The most keys of one commit that are described before the pages are told of it.
    static let describedBeforeBroadcast = 64
    /// The most `List` calls in flight while the catalog walks the store's directories.
    static let listsInFlight = 16

    private let store: BusSettingsStore
    /// Every key known, sorted (String's order, which is byte order for keys: they are ASCII).
    private var keys: [String] = []
    /// The effective value of each key with one.
    private var values: [String: DBusValue] = [:]
    /// What `Describe` said of each key described so far.
    private var entries: [String: Entry] = [:]
    /// The serial of the last update the catalog applied.
    private(set) var serial: UInt64 = 0
    /// Whether the first read of the store has been applied.
    private var isLoaded = false
    private var loadWaiters: [CheckedContinuation<Void, Never>] = []
    /// The pages' event streams.
    private var subscribers: [UUID: AsyncStream<Change>.Continuation] = [:]
    /// The search index: each key's name, summary and description, lowercased, one after another in one
    /// buffer (a NUL after each), which `memmem` scans; a key described again is appended anew and its old
    /// text left dead until the buffer is compacted.
    private var index = SearchIndex()
    /// The keys whose user value differs from their default.
    private var modified: Set<String> = []
    /// Keys waiting for a `Describe`, and whether a describer task runs.
    private var describeQueue: [String] = []
    private var isDescribing = false
    /// Whether the describer may run: not before the editor serves, so that its start is not slowed.
    private var mayDescribe = false

    init(store: BusSettingsStore) {
        self.store = store
    }

    /// Watches `/` for as long as the calling task runs: applies the first read and each change, and passes
    /// each change on to the pages.
    func follow() async {
        for await update in store.updates(of: .directory(.root), keepingNewest: 1024) {
            await apply(update)
        }
    }

    /// Waits until the first read of the store has been applied.
    func loaded() async {
        if isLoaded { return }
        await withCheckedContinuation { loadWaiters.append($0) }
    }

    private func apply(_ update: SettingsUpdate) async {
        switch update.kind {
        case .snapshot, .resync:
            var fresh: [String: DBusValue] = [:]
            fresh.reserveCapacity(update.values.count)
            for (key, value) in update.values { fresh[key.rawValue] = value }
            // Keys known only from a listing (no value: secret, or without a default) stay known.
            let listedOnly = keys.filter { values[$0] == nil && entries[$0] != nil }
            values = fresh
            let known = Set(fresh.keys).union(listedOnly)
            for key in keys where !known.contains(key) {
                entries[key] = nil
                modified.remove(key)
                index.set(key, text: nil)
            }
            // String's own order (byte order, for keys are ASCII), which the standard library sorts fastest.
            keys = known.sorted()
            // Found by name until described.
            for key in keys where !index.contains(key) { index.set(key, text: key) }
            serial = update.serial
            if update.kind == .resync { broadcast(update) }
            enqueueDescribe(keys)
            if !isLoaded {
                isLoaded = true
                for waiter in loadWaiters { waiter.resume() }
                loadWaiters = []
            }
        case .change:
            serial = max(serial, update.serial)
            var touched: [String] = []
            for (key, value) in update.values {
                if values.updateValue(value, forKey: key.rawValue) == nil { insert(key.rawValue) }
                touched.append(key.rawValue)
            }
            for key in update.removed {
                values[key.rawValue] = nil
                touched.append(key.rawValue)
            }
            // A small commit's keys are described before the pages hear of it, so that a search or the Modified
            // only filter that a page runs on the news finds them as they are now; a large one's afterwards.
            if touched.count <= Self.describedBeforeBroadcast {
                await describeNow(touched)
            } else {
                enqueueDescribe(touched)
            }
            broadcast(update)
        case .unavailable:
            break
        }
    }

    private func insert(_ key: String) {
        let position = lowerBound(key)
        if position < keys.count, keys[position] == key { return }
        keys.insert(key, at: position)
        // Found by its name until it is described.
        index.set(key, text: key)
    }

    /// The index of the first key not before `text`.
    private func lowerBound(_ text: String) -> Int {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle] < text { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The index of the first key after every key under `directory`.
    private func upperBound(under directory: String) -> Int {
        var low = lowerBound(directory)
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle].hasPrefix(directory) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// How many keys the catalog knows under `directory`, at any depth.
    func count(under directory: String) -> Int {
        upperBound(under: directory) - lowerBound(directory)
    }

    /// Notes keys that a listing found (a key without a value is not in `ReadTree`).
    func note(listed keys: [String]) {
        var fresh: [String] = []
        for key in keys where entries[key] == nil && values[key] == nil {
            insert(key)
            fresh.append(key)
        }
        enqueueDescribe(fresh)
    }

    /// Records what a `Describe` said of a key (the key page and the listings read it anyway).
    func note(_ key: String, _ description: SettingDescription) {
        record(key, description)
    }

    /// How many keys are known, and how many have been described for search.
    func progress() -> (keys: Int, described: Int) {
        (keys.count, entries.count)
    }

    /// A search over key names, summaries and descriptions: each word of `query` (case ignored) appears in one
    /// of them. With `modifiedOnly`, only keys whose user value differs from their default. At most `limit`
    /// keys, in key order, and how many matched in all.
    func search(
        _ query: String, under directory: String, modifiedOnly: Bool, limit: Int
    ) -> (keys: [(key: String, summary: String?)], total: Int) {
        let words = query.split(whereSeparator: \.isWhitespace).map { SearchIndex.normalized($0) }
        var found: [String]
        if words.isEmpty {
            found = []
            for position in lowerBound(directory)..<upperBound(under: directory) {
                let key = keys[position]
                if !modifiedOnly || modified.contains(key) { found.append(key) }
            }
        } else {
            found = index.keys(containing: words).filter { key in
                key.hasPrefix(directory) && (!modifiedOnly || modified.contains(key))
            }
            found.sort()
        }
        return (found.prefix(limit).map { ($0, entries[$0]?.summary) }, found.count)
    }

    /// Opens an event stream of the changes, for one page.
    func subscribe() -> (UUID, AsyncStream<Change>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Change.self, bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        subscribers[id] = continuation
        return (id, stream)
    }

    /// Closes a page's event stream.
    func unsubscribe(_ id: UUID) {
        subscribers.removeValue(forKey: id)?.finish()
    }

    private func broadcast(_ update: SettingsUpdate) {
        guard !subscribers.isEmpty else { return }
        var values: [String: JSON] = [:]
        var withheld: [String] = []
        // A resync (the broker restarted) carries the whole store: the pages are told to read again instead.
        for (key, value) in update.kind == .resync ? [:] : update.values {
            // A value leaves only for a key described as not secret: a secret's goes out through Reveal alone.
            if entries[key.rawValue]?.isSecret == false {
                values[key.rawValue] = ValueText.json(value)
            } else {
                withheld.append(key.rawValue)
            }
        }
        let json = JSON.object([
            "serial": .number(Double(update.serial)),
            "values": .object(values),
            "withheld": .array(withheld.sorted().map { .string($0) }),
            "removed": .array(update.kind == .resync ? [] : update.removed.map(\.rawValue).sorted().map { .string($0) }),
            "resync": .bool(update.kind == .resync),
        ]).text
        for continuation in subscribers.values { continuation.yield(Change(serial: update.serial, json: json)) }
    }

    /// Walks every directory with `List`, for the keys that `ReadTree` leaves out (a secret key, a key
    /// registered without a default and not set), so that the counts and the search hold them too.
    func walk() async {
        let store = self.store
        var queue: [SettingDirectory] = [.root]
        while !queue.isEmpty {
            let batch = queue
            queue = []
            await withTaskGroup(of: (SettingDirectory, [String]?).self) { group in
                var pending = batch[...]
                var running = 0
                while let directory = pending.popFirst() {
                    group.addTask { (directory, try? await store.list(directory)) }
                    running += 1
                    if running >= Self.listsInFlight, let (directory, children) = await group.next() {
                        running -= 1
                        queue += found(children, in: directory)
                    }
                }
                for await (directory, children) in group { queue += found(children, in: directory) }
            }
        }
    }

    /// Notes the keys of a listing, and returns its subdirectories.
    private func found(_ children: [String]?, in directory: SettingDirectory) -> [SettingDirectory] {
        guard let children else { return [] }
        var keys: [String] = []
        var directories: [SettingDirectory] = []
        for name in children {
            if name.hasSuffix("/") {
                if let subdirectory = try? directory.subdirectory(named: String(name.dropLast())) {
                    directories.append(subdirectory)
                }
            } else {
                keys.append(directory.rawValue + name)
            }
        }
        note(listed: keys)
        return directories
    }

    /// Describes keys at once (a commit's), before returning.
    private func describeNow(_ keys: [String]) async {
        let store = self.store
        await withTaskGroup(of: (String, SettingDescription?).self) { group in
            for key in keys {
                guard let path = try? SettingPath(key) else { continue }
                group.addTask { (key, try? await store.describe(path)) }
            }
            for await (key, description) in group { record(key, description) }
        }
    }

    // MARK: Describing in the background

    private func enqueueDescribe(_ keys: [String]) {
        describeQueue.append(contentsOf: keys)
        if mayDescribe, !isDescribing, !describeQueue.isEmpty {
            isDescribing = true
            Task { await self.describeQueued() }
        }
    }

    /// Lets the describer run, from when the editor serves.
    func startDescribing() {
        mayDescribe = true
        enqueueDescribe([])
    }

    /// Describes the queued keys, `describesInFlight` at a time, until the queue is empty.
    private func describeQueued() async {
        while !describeQueue.isEmpty {
            let batch = describeQueue
            describeQueue = []
            let store = self.store
            await withTaskGroup(of: (String, SettingDescription?).self) { group in
                var pending = batch[...]
                var running = 0
                while let key = pending.popFirst() {
                    guard let path = try? SettingPath(key) else { continue }
                    group.addTask { (key, try? await store.describe(path)) }
                    running += 1
                    if running >= Self.describesInFlight, let (key, description) = await group.next() {
                        running -= 1
                        record(key, description)
                    }
                }
                for await (key, description) in group { record(key, description) }
            }
        }
        isDescribing = false
    }

    private func record(_ key: String, _ description: SettingDescription?) {
        guard let description else {
            // Neither registered nor set any more: forgotten unless it has a value.
            if values[key] == nil {
                entries[key] = nil
                modified.remove(key)
                index.set(key, text: nil)
                let position = lowerBound(key)
                if position < keys.count, keys[position] == key { keys.remove(at: position) }
            }
            return
        }
        let summary = description.schema?.summary
        let isModified =
            description.source == "user" && description.userValue != nil
            && description.userValue != description.schema?.defaultValue
        entries[key] = Entry(isModified: isModified, summary: summary, isSecret: description.schema?.isSecret == true)
        if isModified { modified.insert(key) } else { modified.remove(key) }
        index.set(key, text: [key, summary ?? "", description.schema?.description ?? ""].joined(separator: "\n"))
    }
}

/// The text search runs over: each key's name, summary and description, lowercased, in one buffer, each
/// followed by a byte 1 and the whole by a NUL, so that `strstr` (glibc's, which scans many bytes at a time)
/// finds a word in all of them in one pass.
struct SearchIndex {
    /// One key's text in the buffer: `bytes[start..<end]`, with the separator at `end`.
    private struct Slot {
        var start: Int
        var end: Int
        var key: String
        var isLive: Bool
    }

    /// The separator after each text.
    private static let separator: CChar = 1

    /// The texts, then a NUL.
    private var bytes: [CChar] = [0]
    /// In buffer order.
    private var slots: [Slot] = []
    /// The slot of each key that has text.
    private var slotOfKey: [String: Int] = [:]
    /// Bytes of texts replaced since the last compaction.
    private var deadBytes = 0

    /// Whether a key has text.
    func contains(_ key: String) -> Bool { slotOfKey[key] != nil }

    /// A word or text as the buffer holds it: lowercased, with NUL and the separator as spaces.
    static func normalized(_ text: some StringProtocol) -> [CChar] {
        text.lowercased().utf8.map { $0 <= 1 ? 32 : CChar(bitPattern: $0) }
    }

    /// Sets (or, with nil, removes) a key's text.
    mutating func set(_ key: String, text: String?) {
        if let old = slotOfKey.removeValue(forKey: key) {
            slots[old].isLive = false
            deadBytes += slots[old].end - slots[old].start + 1
        }
        guard let text else { return }
        bytes.removeLast()
        let start = bytes.count
        bytes.append(contentsOf: Self.normalized(text))
        slots.append(Slot(start: start, end: bytes.count, key: key, isLive: true))
        bytes.append(Self.separator)
        bytes.append(0)
        slotOfKey[key] = slots.count - 1
        if deadBytes > 1 << 20, deadBytes > bytes.count / 2 { compact() }
    }

    /// The keys whose text holds every word (each as ``normalized(_:)`` makes it).
    mutating func keys(containing words: [[CChar]]) -> [String] {
        let needles = words.filter { !$0.isEmpty }.map { $0 + [0] }
        // The longest word first: it is found in the fewest texts.
        guard let first = needles.max(by: { $0.count < $1.count }) else { return [] }
        let others = needles.filter { $0 != first }
        let slots = self.slots
        var found: [String] = []
        bytes.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count - 1, let hit = strstr(base + offset, first) {
                let slot = slots[Self.slotIndex(holding: base.distance(to: hit), in: slots)]
                offset = slot.end + 1
                guard slot.isLive else { continue }
                // The text alone, ended by a NUL for as long as the other words are looked for.
                base[slot.end] = 0
                if others.allSatisfy({ strstr(base + slot.start, $0) != nil }) { found.append(slot.key) }
                base[slot.end] = Self.separator
            }
        }
        return found
    }

    /// The slot whose text holds the byte at `position`.
    private static func slotIndex(holding position: Int, in slots: [Slot]) -> Int {
        var low = 0
        var high = slots.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if slots[middle].start <= position { low = middle } else { high = middle - 1 }
        }
        return low
    }

    /// Drops the dead texts.
    private mutating func compact() {
        var fresh = SearchIndex()
        fresh.bytes.reserveCapacity(bytes.count - deadBytes)
        fresh.bytes.removeLast()
        for slot in slots where slot.isLive {
            let start = fresh.bytes.count
            fresh.bytes.append(contentsOf: bytes[slot.start..<slot.end])
            fresh.slots.append(Slot(start: start, end: fresh.bytes.count, key: slot.key, isLive: true))
            fresh.bytes.append(Self.separator)
            fresh.slotOfKey[slot.key] = fresh.slots.count - 1
        }
        fresh.bytes.append(0)
        self = fresh
    }
}
