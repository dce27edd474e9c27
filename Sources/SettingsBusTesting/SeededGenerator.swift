// SPDX-License-Identifier: Apache-2.0

/// A small deterministic random number generator (SplitMix64), so that a test that draws random cases can
/// be replayed from its seed.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    /// The generator's state; the seed at first.
    public var state: UInt64

    /// Makes a generator that starts at `state`.
    public init(state: UInt64) {
        self.state = state
    }

    /// The next number.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
