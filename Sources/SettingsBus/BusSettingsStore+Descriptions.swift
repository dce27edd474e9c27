// SPDX-License-Identifier: Apache-2.0

import DBus
public import SettingsModel

// The descriptions of a key: a subscription to the broker's `DescriptionChanged` signal, apart from the value
// watches of `WatchHub` (a description changes seldom, and is read again with `Describe` each time).
extension BusSettingsStore {
    /// The descriptions of a key: the current one, then a new one after each `DescriptionChanged` signal that
    /// names the key, and after the broker restarts (its schemas may have changed meanwhile). The stream
    /// subscribes (`arg0path` set to the key, `sender` the broker's name) before it reads, so no change falls
    /// between; it reconnects when the connection is lost and ends when the consuming task is cancelled or the
    /// store is closed.
    public func descriptions(for key: SettingPath) -> AsyncStream<SettingDescription> {
        let (stream, continuation) = AsyncStream.makeStream(of: SettingDescription.self)
        let task = Task { [link] in
            await Self.followDescriptions(of: key, link: link, store: self, into: continuation)
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    private enum DescriptionEvent: Sendable {
        case changed, brokerStarted, ended
    }

    private static func followDescriptions(
        of key: SettingPath, link: BrokerLink, store: BusSettingsStore,
        into continuation: AsyncStream<SettingDescription>.Continuation
    ) async {
        var failures = 0
        while !Task.isCancelled {
            let connection: DBusConnection
            do throws(SettingsError) {
                connection = try await link.connection()
            } catch {
                if error.code == .disconnected { return }
                failures += 1
                let delay = min(2000, 25 << min(failures, 7))
                do { try await Task.sleep(for: .milliseconds(delay)) } catch { return }
                continue
            }
            var rule = MatchRule(
                sender: link.busName, interface: SettingsBusNames.interface,
                member: Settings1.DescriptionChangedSignal.member, path: SettingsBusNames.objectPath)
            rule.argumentPaths[0] = key.rawValue
            let (events, sink) = AsyncStream.makeStream(of: DescriptionEvent.self)
            let signals: DBusSignalSubscription
            let owners: NameOwnerChanges
            do {
                signals = try await connection.forwardSignals(
                    matching: rule,
                    to: { message in
                        guard let signal = try? Settings1.DescriptionChangedSignal(message.body),
                            signal.keys.contains(key.rawValue)
                        else { return }
                        sink.yield(.changed)
                    },
                    ended: { sink.yield(.ended) })
                owners = try await connection.nameOwnerChanges(of: link.busName)
            } catch {
                failures += 1
                let delay = min(2000, 25 << min(failures, 7))
                do { try await Task.sleep(for: .milliseconds(delay)) } catch { return }
                continue
            }
            failures = 0
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await change in owners where change.newOwner != nil { sink.yield(.brokerStarted) }
                    sink.yield(.ended)
                }
                continuation.yield(await store.currentDescription(of: key))
                loop: for await event in events {
                    switch event {
                    case .changed, .brokerStarted: continuation.yield(await store.currentDescription(of: key))
                    case .ended: break loop
                    }
                }
                group.cancelAll()
            }
            signals.end()
        }
    }
}
