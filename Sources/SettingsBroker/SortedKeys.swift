// SPDX-License-Identifier: Apache-2.0

/// Keys in byte order, for range queries: the keys of a directory `/a/b/` are the range [`/a/b/`, `/a/b0`),
/// because `0` is the byte after `/`.
///
/// A sorted array kept in chunks of at most ``chunkCapacity`` keys: adding or removing one key moves at most
/// one chunk's keys (memmove of up to 8 KiB) and, when a chunk splits or empties, the array of chunks (one
/// pointer per chunk, 2,000 of them for 1,000,000 keys), where a single sorted array would move half the
/// keys. Finding a key is a binary search over the chunks' last keys, then within one chunk. A batch of keys
/// in order (a commit's writes) is merged into the chunks it falls in, in one pass over them
/// (``apply(inserting:removing:)``), so a reset of 100,000 keys in one directory drops whole chunks instead
/// of searching for each key.
///
/// Each key costs its `String` (16 bytes; the text itself is shared with the table that holds the key), and a
/// chunk is allocated for its full capacity: keys loaded in order fill their chunks, a chunk split by an
/// insertion keeps half of its keys.
struct SortedKeys {
    /// The chunks, in order; none is empty, each holds at most `chunkCapacity` keys.
    private var chunks: [[String]] = []
    /// The number of keys.
    private(set) var count = 0
    /// The most keys a chunk holds.
    let chunkCapacity: Int

    /// A position: a chunk and an offset in it. The end is one past the last chunk.
    struct Index: Comparable {
        fileprivate var chunk: Int
        fileprivate var offset: Int

        static func < (lhs: Self, rhs: Self) -> Bool {
            (lhs.chunk, lhs.offset) < (rhs.chunk, rhs.offset)
        }
    }

    init(chunkCapacity: Int = 512) {
        precondition(chunkCapacity >= 4)
        self.chunkCapacity = chunkCapacity
    }

    /// Keys given in strictly increasing order, cut into full chunks without a search.
    init(increasing keys: some Sequence<String>, chunkCapacity: Int = 512) {
        self.init(chunkCapacity: chunkCapacity)
        var pending = Array(keys)
        count = pending.count
        var chunks: [[String]] = []
        chunks.reserveCapacity((count + chunkCapacity - 1) / chunkCapacity)
        flush(&pending, into: &chunks)
        self.chunks = chunks
    }

    var isEmpty: Bool { count == 0 }

    var startIndex: Index { Index(chunk: 0, offset: 0) }
    var endIndex: Index { Index(chunk: chunks.count, offset: 0) }

    func index(after index: Index) -> Index {
        index.offset + 1 < chunks[index.chunk].count
            ? Index(chunk: index.chunk, offset: index.offset + 1) : Index(chunk: index.chunk + 1, offset: 0)
    }

    subscript(index: Index) -> String { chunks[index.chunk][index.offset] }

    /// The position of the first key that is not less than `text` (the end if there is none).
    func firstIndex(notBefore text: String) -> Index {
        firstIndex { $0 < text }
    }

    /// The position of the first key greater than `text` (the end if there is none).
    func firstIndex(after text: String) -> Index {
        firstIndex { $0 <= text }
    }

    /// The first position whose key is not `isBefore`; `isBefore` holds for a prefix of the keys.
    private func firstIndex(_ isBefore: (String) -> Bool) -> Index {
        var low = 0, high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if isBefore(chunks[middle][chunks[middle].count - 1]) { low = middle + 1 } else { high = middle }
        }
        guard low < chunks.count else { return endIndex }
        return Index(chunk: low, offset: Self.firstIndex(in: chunks[low], isBefore))
    }

    private static func firstIndex(in chunk: [String], _ isBefore: (String) -> Bool) -> Int {
        var low = 0, high = chunk.count
        while low < high {
            let middle = (low + high) / 2
            if isBefore(chunk[middle]) { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Whether the key is present.
    func contains(_ text: String) -> Bool {
        let index = firstIndex(notBefore: text)
        return index != endIndex && self[index] == text
    }

    /// Adds a key; false if it was present.
    @discardableResult
    mutating func insert(_ text: String) -> Bool {
        // Keys loaded in order, and new keys that sort last, are appended without a search.
        if let lastChunk = chunks.indices.last {
            let last = chunks[lastChunk][chunks[lastChunk].count - 1]
            if last < text {
                if chunks[lastChunk].count < chunkCapacity {
                    chunks[lastChunk].append(text)
                } else {
                    chunks.append(newChunk([text]))
                }
                count += 1
                return true
            }
        } else {
            chunks.append(newChunk([text]))
            count = 1
            return true
        }
        let index = firstIndex(notBefore: text)
        if index != endIndex, self[index] == text { return false }
        // Not at the end: `index` is inside a chunk. A full chunk is split first, so that it never grows past
        // its capacity (an array grows by doubling).
        var (chunk, offset) = (index.chunk, index.offset)
        if chunks[chunk].count == chunkCapacity {
            let half = chunkCapacity / 2
            chunks.insert(newChunk(chunks[chunk][half...]), at: chunk + 1)
            chunks[chunk].removeSubrange(half...)
            // At `half` exactly the key goes last in the lower chunk: it sorts before the upper chunk's first.
            if offset > half {
                chunk += 1
                offset -= half
            }
        }
        chunks[chunk].insert(text, at: offset)
        count += 1
        return true
    }

    /// Removes a key; false if it was not present.
    @discardableResult
    mutating func remove(_ text: String) -> Bool {
        let index = firstIndex(notBefore: text)
        guard index != endIndex, self[index] == text else { return false }
        chunks[index.chunk].remove(at: index.offset)
        count -= 1
        mergeIfSmall(index.chunk)
        return true
    }

    /// Adds and removes keys given in increasing order, in one pass over the chunks they fall in. A key to add
    /// that is present, or one to remove that is not, is passed over.
    mutating func apply(inserting insertions: [String], removing removals: [String]) {
        // A few keys: one search each costs less than rebuilding the chunks they touch.
        if insertions.count + removals.count <= 16 {
            for text in removals { remove(text) }
            for text in insertions { insert(text) }
            return
        }
        // Only the chunks from the one the first change falls in to the one the last falls in are rebuilt.
        var range = 0..<0
        if !chunks.isEmpty {
            let lowest = [insertions.first, removals.first].compactMap { $0 }.min()!
            let highest = [insertions.last, removals.last].compactMap { $0 }.max()!
            range = chunk(holding: lowest)..<(chunk(holding: highest) + 1)
        }
        var rebuilt: [[String]] = []
        rebuilt.reserveCapacity(range.count + insertions.count / chunkCapacity + 1)
        var pending: [String] = []  // keys of the chunk being rebuilt, not yet cut into chunks
        var insert = insertions[...], remove = removals[...]
        var newCount = count
        for position in range {
            let chunk = chunks[position]
            let isLast = position == range.upperBound - 1
            let last = chunk[chunk.count - 1]
            // The changes that fall in this chunk: keys up to its last one (every key left, for the last chunk).
            let insertEnd = isLast ? insert.endIndex : (insert.firstIndex { $0 > last } ?? insert.endIndex)
            let removeEnd = isLast ? remove.endIndex : (remove.firstIndex { $0 > last } ?? remove.endIndex)
            if insertEnd == insert.startIndex, removeEnd == remove.startIndex {
                flush(&pending, into: &rebuilt)
                rebuilt.append(chunk)
                continue
            }
            var merged: [String] = []
            merged.reserveCapacity(chunk.count + insertEnd - insert.startIndex)
            var i = insert.startIndex, r = remove.startIndex
            for key in chunk {
                while i < insertEnd, insert[i] < key {
                    merged.append(insert[i])
                    newCount += 1
                    i += 1
                }
                if i < insertEnd, insert[i] == key { i += 1 }
                while r < removeEnd, remove[r] < key { r += 1 }
                if r < removeEnd, remove[r] == key {
                    r += 1
                    newCount -= 1
                    continue
                }
                merged.append(key)
            }
            while i < insertEnd {
                if merged.last.map({ $0 < insert[i] }) ?? true {
                    merged.append(insert[i])
                    newCount += 1
                }
                i += 1
            }
            insert = insert[insertEnd...]
            remove = remove[removeEnd...]
            pending.append(contentsOf: merged)
            // A small remainder waits to be joined with the next chunk.
            if pending.count >= chunkCapacity / 2 { flush(&pending, into: &rebuilt) }
        }
        if chunks.isEmpty {
            var previous: String?
            for key in insert where previous.map({ $0 < key }) ?? true {
                pending.append(key)
                previous = key
                newCount += 1
            }
        }
        flush(&pending, into: &rebuilt)
        chunks.replaceSubrange(range, with: rebuilt)
        count = newCount
    }

    /// The chunk a key falls in: the first whose last key is not less than it, else the last chunk. Chunks only.
    private func chunk(holding text: String) -> Int {
        var low = 0, high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle][chunks[middle].count - 1] < text { low = middle + 1 } else { high = middle }
        }
        return Swift.min(low, chunks.count - 1)
    }

    /// Cuts keys in order into chunks (full ones, the rest in one) and appends them.
    private func flush(_ pending: inout [String], into rebuilt: inout [[String]]) {
        var start = 0
        while start < pending.count {
            let end = Swift.min(start + chunkCapacity, pending.count)
            rebuilt.append(newChunk(pending[start..<end]))
            start = end
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// A chunk of `keys`, allocated for the full capacity so that it does not grow by doubling.
    private func newChunk(_ keys: some Collection<String>) -> [String] {
        var chunk: [String] = []
        chunk.reserveCapacity(chunkCapacity)
        chunk.append(contentsOf: keys)
        return chunk
    }

    /// Removes an empty chunk, and joins one that fell below a quarter of the capacity with a neighbour when
    /// both fit in one.
    private mutating func mergeIfSmall(_ position: Int) {
        if chunks[position].isEmpty {
            chunks.remove(at: position)
            return
        }
        guard chunks[position].count < chunkCapacity / 4 else { return }
        if position + 1 < chunks.count, chunks[position].count + chunks[position + 1].count <= chunkCapacity {
            let next = chunks.remove(at: position + 1)
            chunks[position].append(contentsOf: next)
        } else if position > 0, chunks[position - 1].count + chunks[position].count <= chunkCapacity {
            let this = chunks.remove(at: position)
            chunks[position - 1].append(contentsOf: this)
        }
    }
}

extension SortedKeys: Collection {}

extension SortedKeys {
    /// Checks the invariants (tests only): chunks non-empty and within capacity, keys strictly increasing,
    /// the count right.
    func checkInvariants() -> String? {
        var total = 0
        var previous: String?
        for (position, chunk) in chunks.enumerated() {
            if chunk.isEmpty { return "chunk \(position) is empty" }
            if chunk.count > chunkCapacity { return "chunk \(position) holds \(chunk.count) keys" }
            for key in chunk {
                if let previous, !(previous < key) { return "\(previous) is not before \(key)" }
                previous = key
            }
            total += chunk.count
        }
        return total == count ? nil : "count is \(count), the chunks hold \(total)"
    }

    /// The number of chunks (tests and memory estimates).
    var chunkCount: Int { chunks.count }
}
