// SPDX-License-Identifier: Apache-2.0

/// The serialized GVariant `a{smv}` that dconf's `ca.desrt.dconf.Writer.Change(ay blob)` takes, for
/// changesets whose values are strings (or resets).
///
/// GVariant's serialization (little-endian, as dconf-service on this machine expects): a string is its
/// bytes and a NUL; a variant is its child, a NUL and the child's type string; a maybe of a variable-size
/// type is its child and a NUL (nothing is empty); a dict entry aligns its value to 8 and ends with the
/// framing offset of its key; an array of variable-size elements aligns each to 8 and ends with the
/// framing offset of each element. Offsets take 1, 2, 4 or 8 bytes, the fewest that can address the
/// container.
enum DconfChangeset {
    /// Serializes a changeset: each key with its new string value, or nil to reset it (a key ending in `/`
    /// resets a directory).
    static func serialize(_ entries: [(key: String, value: String?)]) -> [UInt8] {
        var body: [UInt8] = []
        var ends: [Int] = []
        for entry in entries {
            pad(&body, to: 8)
            body += dictEntry(key: entry.key, value: entry.value)
            ends.append(body.count)
        }
        return framed(body, offsets: ends)
    }

    private static func dictEntry(key: String, value: String?) -> [UInt8] {
        var body = Array(key.utf8) + [0]
        let keyEnd = body.count
        pad(&body, to: 8)
        if let value {
            body += Array(value.utf8) + [0]  // the string
            body += [0] + Array("s".utf8)  // the variant's separator and type
            body += [0]  // the maybe's "just" marker
        }
        return framed(body, offsets: [keyEnd])
    }

    private static func pad(_ bytes: inout [UInt8], to alignment: Int) {
        while bytes.count % alignment != 0 { bytes.append(0) }
    }

    /// Appends the framing offsets, each in the smallest size that addresses the whole container.
    private static func framed(_ body: [UInt8], offsets: [Int]) -> [UInt8] {
        let size: Int
        if body.count + offsets.count <= Int(UInt8.max) {
            size = 1
        } else if body.count + 2 * offsets.count <= Int(UInt16.max) {
            size = 2
        } else if body.count + 4 * offsets.count <= Int(UInt32.max) {
            size = 4
        } else {
            size = 8
        }
        var result = body
        result.reserveCapacity(body.count + size * offsets.count)
        for offset in offsets {
            var value = UInt64(offset)
            for _ in 0..<size {
                result.append(UInt8(value & 0xff))
                value >>= 8
            }
        }
        return result
    }
}
