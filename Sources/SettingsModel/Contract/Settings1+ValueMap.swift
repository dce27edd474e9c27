// SPDX-License-Identifier: Apache-2.0

public import DBus

extension Settings1 {
    /// An `a{sv}` argument: names (keys, options, fields) with their values, in the order they travel.
    ///
    /// It keeps the dictionary's entries as they are, so that making the argument from a map and reading a map
    /// from a received argument copy nothing: a `ReadTree` reply or a `Changed` signal may carry 100,000 values.
    /// Names are not read as keys here; the reader does that where it needs to.
    ///
    /// ```swift
    /// let values = Settings1.ValueMap(["/org/example/theme": .string("dark")])
    /// for (name, value) in values { print(name, value) }   // /org/example/theme string("dark")
    /// ```
    public struct ValueMap: Sendable, Hashable, RandomAccessCollection, ExpressibleByDictionaryLiteral {
        /// The dictionary's entries; each a string with a variant.
        public let entries: [DBusDictEntry]

        /// Reads an `a{sv}` value; nil for a value of another type.
        public init?(_ value: DBusValue) {
            guard case .dictionary(.string, .variant, let entries) = value else { return nil }
            for entry in entries {
                guard case .string = entry.key, case .variant = entry.value else { return nil }
            }
            self.entries = entries
        }

        /// Makes an empty map.
        public init() {
            entries = []
        }

        /// Makes a map of names and values, in the given order.
        public init(_ pairs: some Sequence<(String, DBusValue)>) {
            entries = pairs.map { DBusDictEntry(key: .string($0.0), value: .variant($0.1)) }
        }

        /// Makes a map of the values of a dictionary, sorted by name.
        public init(_ values: [String: DBusValue]) {
            self.init(values.sorted { $0.key < $1.key }.lazy.map { ($0.key, $0.value) })
        }

        /// Makes a map of the values of keys, sorted by key.
        public init(_ values: [SettingPath: DBusValue]) {
            self.init(values.sorted { $0.key < $1.key }.lazy.map { ($0.key.rawValue, $0.value) })
        }

        /// Makes a map from a literal, in its order.
        public init(dictionaryLiteral elements: (String, DBusValue)...) {
            self.init(elements)
        }

        /// The map as the `a{sv}` value it travels as.
        public var dbusValue: DBusValue { .dictionary(key: .string, value: .variant, entries) }

        /// The map as a dictionary; a name given twice keeps its last value.
        public var dictionary: [String: DBusValue] {
            var dictionary: [String: DBusValue] = [:]
            dictionary.reserveCapacity(entries.count)
            for (name, value) in self { dictionary[name] = value }
            return dictionary
        }

        /// The value of a name, if the map has it (the last one, if it has it twice).
        public subscript(name: String) -> DBusValue? {
            entries.lazy.reversed().first { $0.key == .string(name) }.map { self[entryAt: $0] }
        }

        // MARK: RandomAccessCollection

        public var startIndex: Int { entries.startIndex }
        public var endIndex: Int { entries.endIndex }

        /// The name and value at a position.
        public subscript(position: Int) -> (name: String, value: DBusValue) {
            let entry = entries[position]
            guard case .string(let name) = entry.key else { return ("", self[entryAt: entry]) }
            return (name, self[entryAt: entry])
        }

        private subscript(entryAt entry: DBusDictEntry) -> DBusValue {
            if case .variant(let value) = entry.value { return value }
            return entry.value
        }
    }
}
