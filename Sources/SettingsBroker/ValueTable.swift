// SPDX-License-Identifier: Apache-2.0

import DBus
import OrderedCollections
import SettingsModel

/// The stored values the broker serves: each key's user value and the serial of the commit that wrote it.
///
/// Laid out for a store of many keys. A `Dictionary` of 100,000 keys needs 2^18 buckets (it is at most three
/// quarters full), 8 MiB at 32 bytes a bucket; here the keys and values sit in two dense arrays and the hash
/// table holds only their positions (18 bits each at that size), and a value of the kinds settings mostly
/// hold is kept in less room than a ``DBus/DBusValue`` (see ``StoredValue``). With 100,000 keys of
/// short text the broker's resident memory fell from 52.6 to 45.3 MiB.
///
/// The dense arrays are in no particular order (removing a key moves the last entry into its place); the
/// keys' order, for reading a directory, is kept beside them in ``order`` (``SortedKeys``: 16 bytes a key
/// at most, the key's text shared with the dense array), so that a directory costs what it holds.
struct ValueTable {
    private var entries: OrderedDictionary<SettingPath, UserValue>
    /// Every key with a value, in byte order.
    private(set) var order = SortedKeys()

    /// A user value and the serial of the commit that stored it.
    struct UserValue: StoredSettingValue {
        /// The serial of the commit that stored the value.
        var serial: UInt64
        private var stored: StoredValue

        init(value: DBusValue, serial: UInt64) {
            self.serial = serial
            self.stored = StoredValue(value)
        }

        /// A value from the GVariant text a store holds for it, read as `type` (see
        /// ``StoredValue/init(storedText:as:)``).
        init(storedText text: UnsafeBufferPointer<UInt8>, as type: DBusType, serial: UInt64) throws(GVariantTextError) {
            self.serial = serial
            self.stored = try StoredValue(storedText: text, as: type)
        }

        /// The value.
        var value: DBusValue { stored.value }

        /// The value's type, read without making the value.
        var type: DBusType { stored.type }
    }

    init(minimumCapacity: Int = 0) {
        entries = OrderedDictionary(minimumCapacity: minimumCapacity)
    }

    /// A table of keys given in strictly increasing byte order, with their values, built in one pass: no key
    /// is looked up, since none can be there twice (a store's rows, read in the order of their paths).
    init(increasingKeys keys: ContiguousArray<SettingPath>, values: ContiguousArray<UserValue>) {
        self.init(increasingKeys: keys, values: values) { Self.order(ofIncreasingKeys: keys) }
    }

    /// The keys' order of a table of keys given in strictly increasing byte order.
    static func order(ofIncreasingKeys keys: ContiguousArray<SettingPath>) -> SortedKeys {
        SortedKeys(increasing: keys.lazy.map(\.rawValue))
    }

    /// The same table, with the keys' order given by `order` once the hash table is made (so that another
    /// thread can make the order meanwhile): it must be ``order(ofIncreasingKeys:)`` of `keys`.
    init(
        increasingKeys keys: ContiguousArray<SettingPath>, values: ContiguousArray<UserValue>,
        order: () -> SortedKeys
    ) {
        precondition(keys.count == values.count)
        entries = OrderedDictionary(uncheckedUniqueKeys: keys, values: values)
        self.order = order()
    }

    /// The number of keys with a value.
    var count: Int { entries.count }

    /// Every key with a value, in no particular order.
    var keys: OrderedSet<SettingPath> { entries.keys }

    /// The user value of a key; setting nil removes it.
    subscript(key: SettingPath) -> UserValue? {
        get { entries[key] }
        set {
            if let newValue {
                if entries.updateValue(newValue, forKey: key) == nil { order.insert(key.rawValue) }
            } else if let index = entries.index(forKey: key) {
                // Removing from the middle of the dense arrays would shift every later entry.
                entries.swapAt(index, entries.count - 1)
                entries.removeLast()
                order.remove(key.rawValue)
            }
        }
    }

    /// Stores or removes the values of keys given in increasing order, all at one serial; the keys' order is
    /// updated in one pass (a reset of a directory of 100,000 keys drops whole chunks of it).
    mutating func apply(_ writes: some Collection<(key: SettingPath, value: DBusValue?)>, serial: UInt64) {
        var inserted: [String] = [], removed: [String] = []
        for (key, value) in writes {
            if let value {
                if entries.updateValue(UserValue(value: value, serial: serial), forKey: key) == nil {
                    inserted.append(key.rawValue)
                }
            } else if let index = entries.index(forKey: key) {
                entries.swapAt(index, entries.count - 1)
                entries.removeLast()
                removed.append(key.rawValue)
            }
        }
        if !inserted.isEmpty || !removed.isEmpty { order.apply(inserting: inserted, removing: removed) }
    }

    /// The first entry that satisfies `predicate`, in no particular order.
    func first(where predicate: (SettingPath, UserValue) -> Bool) -> (key: SettingPath, value: UserValue)? {
        entries.elements.first { predicate($0.key, $0.value) }
    }
}

/// The registered schemas, with their keys in byte order beside them (see ``SortedKeys``) for reading a
/// directory.
struct SchemaTable {
    private var schemas: [SettingPath: SettingSchema] = [:]
    /// Every key with a schema, in byte order.
    private(set) var order = SortedKeys()

    init(_ schemas: [SettingPath: SettingSchema]) {
        self.schemas = schemas
        // Sorted once: inserting keys in order appends them to full chunks.
        for key in schemas.keys.sorted() { order.insert(key.rawValue) }
    }

    /// The number of schemas.
    var count: Int { schemas.count }

    /// The schema of a key; set to register one (``remove(_:)`` removes one).
    subscript(key: SettingPath) -> SettingSchema? {
        get { schemas[key] }
        set {
            guard let newValue else { preconditionFailure("a schema is removed with remove(_:)") }
            if schemas.updateValue(newValue, forKey: key) == nil { order.insert(key.rawValue) }
        }
    }

    /// Removes the schema of a key (`Unregister`).
    mutating func remove(_ key: SettingPath) {
        if schemas.removeValue(forKey: key) != nil { _ = order.remove(key.rawValue) }
    }
}

/// A ``DBus/DBusValue`` as the broker keeps it in memory: text and numbers inline, other values as they are.
///
/// A `DBusValue` is 17 bytes and keeps a `String` as it is. Here text of up to 22 bytes sits in place
/// (``InlineText``; a Swift `String` keeps only 15 in place and allocates 64 bytes for one of 16 to 31), longer
/// text is a `String`, numbers are themselves, and other values are boxed: the enum is 24 bytes, and a
/// ``ValueTable/UserValue`` with its serial 32.
enum StoredValue {
    case shortString(InlineText)
    case string(String)
    case boolean(Bool)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    indirect case other(DBusValue)

    init(_ value: DBusValue) {
        switch value {
        case .string(let text): self = InlineText(text).map { .shortString($0) } ?? .string(text)
        case .boolean(let flag): self = .boolean(flag)
        case .int32(let number): self = .int32(number)
        case .uint32(let number): self = .uint32(number)
        case .int64(let number): self = .int64(number)
        case .uint64(let number): self = .uint64(number)
        case .double(let number): self = .double(number)
        default: self = .other(value)
        }
    }

    /// A value from the GVariant text a store holds, read as `type`. Text in its commonest form is taken from
    /// the text's bytes as the parser takes it, short text straight into ``InlineText`` with no `String` made (a
    /// store of 100,000 such values is read at every start); anything else is parsed
    /// (``SettingsModel/GVariantText``).
    init(storedText text: UnsafeBufferPointer<UInt8>, as type: DBusType) throws(GVariantTextError) {
        // A NUL, which no D-Bus string holds, is the parser's to refuse.
        if case .string = type, let inner = GVariantText.plainStringContents(text), !inner.contains(0) {
            self = InlineText(inner).map { .shortString($0) } ?? .string(String(decoding: inner, as: UTF8.self))
        } else {
            self.init(try GVariantText.parse(utf8: text, as: type))
        }
    }

    var value: DBusValue {
        switch self {
        case .shortString(let text): .string(text.string)
        case .string(let text): .string(text)
        case .boolean(let flag): .boolean(flag)
        case .int32(let number): .int32(number)
        case .uint32(let number): .uint32(number)
        case .int64(let number): .int64(number)
        case .uint64(let number): .uint64(number)
        case .double(let number): .double(number)
        case .other(let value): value
        }
    }

    var type: DBusType {
        switch self {
        case .shortString, .string: .string
        case .boolean: .boolean
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .other(let value): value.type
        }
    }
}

/// Up to 22 bytes of UTF-8 text in place, with no allocation: with its count, 23 bytes, so that the enum
/// that holds it needs 24.
struct InlineText {
    private var bytes: (UInt64, UInt64, UInt32, UInt16) = (0, 0, 0, 0)
    private var count: UInt8 = 0

    /// The most bytes it holds.
    static let capacity = 22

    /// The text in place, or nil when it is longer than ``capacity`` bytes.
    init?(_ text: String) {
        var text = text
        guard let inline = text.withUTF8({ Self($0[...]) }) else { return nil }
        self = inline
    }

    /// The text of these UTF-8 bytes in place, or nil when they are more than ``capacity``. Bytes that are not
    /// UTF-8 read as `String(decoding:as:)` reads them.
    init?(_ utf8: Slice<UnsafeBufferPointer<UInt8>>) {
        guard utf8.count <= Self.capacity else { return nil }
        let source = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8))
        withUnsafeMutableBytes(of: &bytes) { $0.copyMemory(from: source) }
        count = UInt8(utf8.count)
    }

    /// The text.
    var string: String {
        withUnsafeBytes(of: bytes) { String(decoding: $0.prefix(Int(count)), as: UTF8.self) }
    }
}

/// The serial of each key's last reset (for compare-and-set), with the keys in byte order beside them (see
/// ``SortedKeys``), so that a compare-and-set on a directory looks only at the resets below it.
struct ResetSerials {
    private var serials: [SettingPath: UInt64] = [:]
    /// Every key in `serials`, in byte order.
    private(set) var order = SortedKeys()

    /// The serial of a key's last reset, nil if it was not reset or has a value again.
    subscript(key: SettingPath) -> UInt64? {
        serials[key]
    }

    /// Records a commit's writes, given in key order: a removal is a reset at `serial`, a value forgets the
    /// key's reset.
    mutating func record(_ writes: some Collection<(key: SettingPath, value: DBusValue?)>, serial: UInt64) {
        var inserted: [String] = [], removed: [String] = []
        for (key, value) in writes {
            if value == nil {
                if serials.updateValue(serial, forKey: key) == nil { inserted.append(key.rawValue) }
            } else if serials.removeValue(forKey: key) != nil {
                removed.append(key.rawValue)
            }
        }
        if !inserted.isEmpty || !removed.isEmpty { order.apply(inserting: inserted, removing: removed) }
    }

    /// The first key below `directory` reset after `serial`, and the serial of that reset.
    func first(in directory: SettingDirectory, after serial: UInt64) -> (key: SettingPath, serial: UInt64)? {
        let upper = CommittedState.upperBound(of: directory)
        var index = order.firstIndex(notBefore: directory.rawValue)
        while index != order.endIndex, order[index] < upper {
            let key = SettingPath(unchecked: order[index])
            if let reset = serials[key], reset > serial { return (key, reset) }
            index = order.index(after: index)
        }
        return nil
    }
}
