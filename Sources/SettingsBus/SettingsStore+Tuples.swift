// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

extension SettingsStore {
    /// The values of several keys together: a tuple of their current values first, then a new tuple each time
    /// one of them changes.
    ///
    /// ```swift
    /// for await (theme, fontSize) in settings.values(for: .theme, .fontSize) {
    ///     editor.restyle(theme: theme, fontSize: fontSize)
    /// }
    /// ```
    ///
    /// Each key is watched as ``values(for:)`` watches one: the stream waits until it knows every key's value,
    /// keeps only the newest tuple when the consumer is slower than the writers, and does not yield a tuple
    /// equal to the one it has just yielded. A commit that changes several of the keys may come as one tuple
    /// or as one per key.
    ///
    /// - Important: The stream ends when the task iterating it is cancelled.
    public func values<First, Second, each Rest>(
        for first: SettingKey<First>, _ second: SettingKey<Second>, _ rest: repeat SettingKey<each Rest>
    ) -> AsyncStream<(First, Second, repeat each Rest)> {
        var paths = [first.path, second.path]
        for key in repeat each rest { paths.append(key.path) }
        let (tuples, output) = AsyncStream.makeStream(
            of: (First, Second, repeat each Rest).self, bufferingPolicy: .bufferingNewest(1))
        let (merged, input) = AsyncStream.makeStream(of: (Int, SettingsUpdate).self)
        let watches = paths.enumerated().map { index, path in
            let updates = updates(of: .key(path), keepingNewest: 1)
            return Task {
                for await update in updates { input.yield((index, update)) }
            }
        }
        let rests = (repeat each rest)
        let combiner = Task {
            var current = [DBusValue?](repeating: nil, count: paths.count)
            var known = [Bool](repeating: false, count: paths.count)
            var last: [DBusValue?]?
            for await (index, update) in merged {
                let path = paths[index]
                if let value = update.values[path] {
                    current[index] = value
                } else if update.kind == .snapshot || update.removed.contains(path)
                    || (update.kind == .unavailable && !known[index])
                {
                    current[index] = nil
                } else {
                    continue
                }
                known[index] = true
                guard !known.contains(false), current != last else { continue }
                last = current
                output.yield(TupleDecoding.decode(current, first, second, repeat each rests))
            }
            output.finish()
        }
        output.onTermination = { _ in
            for watch in watches { watch.cancel() }
            input.finish()
            combiner.cancel()
        }
        return tuples
    }
}

/// Decodes the values of a tuple of keys, in order.
enum TupleDecoding {
    /// The position of the next value to decode.
    final class Cursor {
        let values: [DBusValue?]
        var position: Int

        init(_ values: [DBusValue?], at position: Int) {
            self.values = values
            self.position = position
        }

        func next<Value>(_ key: SettingKey<Value>) -> Value {
            defer { position += 1 }
            return key.decode(values[position]).value
        }
    }

    static func decode<First, Second, each Rest>(
        _ values: [DBusValue?], _ first: SettingKey<First>, _ second: SettingKey<Second>,
        _ rest: repeat SettingKey<each Rest>
    ) -> (First, Second, repeat each Rest) {
        let cursor = Cursor(values, at: 2)
        return (first.decode(values[0]).value, second.decode(values[1]).value, repeat cursor.next(each rest))
    }
}
