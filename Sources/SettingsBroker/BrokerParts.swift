// SPDX-License-Identifier: Apache-2.0

/// One part of a running broker (the schema files, the administrator's files, sync, the bus name, the backup,
/// the store), started and stopped through one interface by ``BrokerParts``.
struct BrokerPart: Sendable {
    /// What the part is, for the log.
    let name: String
    /// Starts the part; a part that cannot start throws ``BrokerService/StartError``.
    let start: @Sendable () async throws -> Void
    /// Stops the part; it does not fail.
    let stop: @Sendable () async -> Void

    init(
        _ name: String, start: @escaping @Sendable () async throws -> Void = {},
        stop: @escaping @Sendable () async -> Void = {}
    ) {
        self.name = name
        self.start = start
        self.stop = stop
    }
}

/// The parts of a running broker and the two orders they go in, stated once: the order they start in and the
/// order they stop in.
///
/// The orders are not each other's reverse. Everything a caller may ask about is in force before the bus name
/// is taken (schemas, the administrator's layer, sync's settings), and the name is released only after the
/// store is closed, so that a broker started next, on the next call, finds the store free.
struct BrokerParts: Sendable {
    /// The parts in the order they start.
    let starting: [BrokerPart]
    /// The parts in the order they stop; a part that never started is not stopped.
    let stopping: [BrokerPart]

    /// - Parameters:
    ///   - starting: every part, in the order they start.
    ///   - stopping: the name of every part, in the order they stop.
    init(starting: [BrokerPart], stopping: [String]) {
        let byName = Dictionary(starting.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        precondition(
            byName.count == starting.count && stopping.count == starting.count && Set(stopping) == Set(byName.keys),
            "every part is named once in each order")
        self.starting = starting
        self.stopping = stopping.map { byName[$0]! }
    }

    /// Starts the parts in order; when one cannot start, stops those that did (in stopping order) and throws
    /// its error.
    func start() async throws -> Started {
        var started: Set<String> = []
        for part in starting {
            do {
                try await part.start()
            } catch {
                await Started(parts: self, names: started).stop()
                throw error
            }
            started.insert(part.name)
        }
        return Started(parts: self, names: started)
    }

    /// Parts that started, to stop.
    struct Started: Sendable {
        let parts: BrokerParts
        let names: Set<String>

        /// Stops the parts that started, in stopping order.
        func stop() async {
            for part in parts.stopping where names.contains(part.name) { await part.stop() }
        }
    }
}
