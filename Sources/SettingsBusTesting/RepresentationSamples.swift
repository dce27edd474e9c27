// SPDX-License-Identifier: Apache-2.0

public import DBus
public import Foundation
public import SettingsBus
public import SettingsModel

/// Values of every representation the client library offers, with the D-Bus type each is stored as, for
/// round-trip tests through a store, the broker and D-Bus tools.
public enum RepresentationSamples {
    /// A raw-value enumeration (stored as `s`).
    public enum Mode: String, SettingValue, Sendable { case automatic, manual }

    /// An integer raw-value enumeration (stored as `i`).
    public enum Level: Int32, SettingValue, Sendable { case low = 1, high = 9 }

    /// A Codable record (stored as `a{sv}`).
    public struct Font: Codable, SettingValue, Hashable, Sendable {
        public var family: String
        public var size: Double
        public var weights: [Int]
        public var fallback: String?
        public var updated: Date
        public static let settingRepresentation = SettingRepresentations.Codable<Font>()

        /// Makes a font.
        public init(family: String, size: Double, weights: [Int], fallback: String?, updated: Date) {
            self.family = family
            self.size = size
            self.weights = weights
            self.fallback = fallback
            self.updated = updated
        }
    }

    /// A type stored through its description (`s`).
    public struct Version: LosslessStringConvertible, SettingValue, Hashable, Sendable {
        public var major: Int
        public var minor: Int
        public static let settingRepresentation = SettingRepresentations.LosslessString<Version>()

        /// Makes a version.
        public init(major: Int, minor: Int) {
            self.major = major
            self.minor = minor
        }

        /// Parses `major.minor`.
        public init?(_ description: String) {
            let parts = description.split(separator: ".")
            guard parts.count == 2, let major = Int(parts[0]), let minor = Int(parts[1]) else { return nil }
            self.init(major: major, minor: minor)
        }

        /// `major.minor`.
        public var description: String { "\(major).\(minor)" }
    }

    /// A type stored through a proxy (`d`).
    public struct Celsius: SettingValue, Hashable, Sendable {
        public var degrees: Double
        public static let settingRepresentation = SettingRepresentations.Proxy<Celsius, Double>(
            to: { $0.degrees }, from: { Celsius(degrees: $0) })

        /// Makes a temperature.
        public init(degrees: Double) { self.degrees = degrees }
    }

    /// A sample font.
    public static let font = Font(
        family: "Mono 'Nerd'", size: 12.5, weights: [400, 700], fallback: nil,
        updated: Date(timeIntervalSince1970: 1_790_000_000.25))

    /// One sample: a name, the D-Bus type it is stored as, and a round trip through a store.
    public struct Sample: Sendable, CustomStringConvertible {
        /// The key name.
        public let name: String
        /// The D-Bus signature text it is stored as.
        public let signature: String
        /// Sets the value at a key, reads it back and says whether it came back equal.
        let roundTrip: @Sendable (any SettingsStore, SettingPath) async throws -> Bool
        /// The encoded value.
        public let encoded: DBusValue
        /// Decodes a D-Bus value and says whether it equals the sample.
        public let matches: @Sendable (DBusValue) -> Bool

        /// The name.
        public var description: String { name }

        init<Value: SettingValue & Equatable>(_ name: String, _ value: Value, _ signature: String) {
            self.name = name
            self.signature = signature
            self.encoded = (try? Value.settingRepresentation.encode(value)) ?? .string("")
            self.roundTrip = { store, path in
                let key = SettingKey(path, default: value)
                try await store.set(key, to: value)
                let plain = try await store.read([path]).values[path]
                return try await store.get(key) == value && plain.map { key.decode($0).value == value } == true
            }
            self.matches = { encoded in (try? Value.settingRepresentation.decode(encoded)) == value }
        }
    }

    /// Every sample.
    public static let all: [Sample] = [
        Sample("bool", true, "b"),
        Sample("uint8", UInt8(200), "y"),
        Sample("int8", Int8(-100), "n"),
        Sample("int16", Int16(-30000), "n"),
        Sample("uint16", UInt16(60000), "q"),
        Sample("int32", Int32(-2_000_000_000), "i"),
        Sample("uint32", UInt32(4_000_000_000), "u"),
        Sample("int64", Int64.min, "x"),
        Sample("uint64", UInt64.max, "t"),
        Sample("int", -42, "x"),
        Sample("uint", UInt(42), "t"),
        Sample("double", 3.25, "d"),
        Sample("float", Float(1.5), "d"),
        Sample("string", "héllo 'wörld' \"quoted\"\n", "s"),
        Sample("bytes", [UInt8](arrayLiteral: 0, 1, 255), "ay"),
        Sample("data", Data([0xde, 0xad, 0xbe, 0xef]), "ay"),
        Sample("strings", ["a", "b c", ""], "as"),
        Sample("nested", [[1, 2], [], [3]], "aax"),
        Sample("dictionary", ["one": 1.0, "two": 2.0], "a{sd}"),
        Sample("set", Set(["x", "y", "z"]), "as"),
        Sample("raw", Mode.manual, "s"),
        Sample("rawInt", Level.high, "i"),
        Sample("lossless", Version(major: 2, minor: 10), "s"),
        Sample("proxy", Celsius(degrees: -4.5), "d"),
        Sample("date", Date(timeIntervalSince1970: 1_800_000_000.5), "d"),
        Sample("url", URL(string: "https://example.org/a?b=c")!, "s"),
        Sample("uuid", UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!, "s"),
        Sample("optional", String?.some("present"), "s"),
        Sample("codable", font, "a{sv}"),
        Sample("codables", [font, font], "av"),
    ]

    /// Sets and reads back every sample under a directory.
    ///
    /// - Throws: ``SettingsStoreConformance/Failure`` naming the first sample that did not come back equal,
    ///   or whose stored type is not the documented one.
    public static func roundTripAll(through store: any SettingsStore, under directory: SettingDirectory) async throws {
        for sample in all {
            let path = try directory.key(named: sample.name)
            guard try await sample.roundTrip(store, path) else {
                throw SettingsStoreConformance.Failure(description: "\(sample.name) did not round-trip", line: #line)
            }
            let stored = try await store.read([path]).values[path]
            guard stored?.type.signatureText == sample.signature else {
                throw SettingsStoreConformance.Failure(
                    description: "\(sample.name) is stored as '\(stored?.type.signatureText ?? "nothing")', "
                        + "not '\(sample.signature)'",
                    line: #line)
            }
        }
    }
}
