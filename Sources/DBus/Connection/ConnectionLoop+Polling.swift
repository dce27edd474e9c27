// SPDX-License-Identifier: Apache-2.0

internal import CDBus
internal import Glibc

// The loop's poll over the connection's watches, its timeouts and the eventfd, and the functions libdbus
// calls to add, remove and toggle them. Loop thread only.

extension ConnectionLoop {
    // MARK: - Polling

    func dispatchAll() {
        guard let pointer = connection else { return }
        while connection != nil, dbus_connection_dispatch(pointer) == DBUS_DISPATCH_DATA_REMAINS {}
    }

    func pollOnce(waiting: Bool) {
        // poll sets every entry's revents, so a list kept from the last poll needs no clearing.
        if pollSetChanged { makePollSet() }
        var timeout: Int32 = 0
        if waiting {
            pollDeadline = nearestDeadline()
            timeout = pollDeadline == .max ? -1 : Int32(clamping: max(0, pollDeadline - monotonicMillis()))
        }
        // While it waits, another thread may hold the loop to send (``runNow(_:)``); it wakes the loop if what
        // the loop waits for changed.
        if timeout != 0 { pthread_mutex_unlock(ownership) }
        let count = poll(&fds, nfds_t(fds.count), timeout)
        if timeout != 0 { pthread_mutex_lock(ownership) }
        guard count > 0 else { return }
        if fds[0].revents != 0 {
            var value: UInt64 = 0
            _ = withUnsafeMutableBytes(of: &value) { read(wakeFD, $0.baseAddress, 8) }
        }
        for (index, entry) in polled.enumerated() {
            let revents = fds[index + 1].revents
            guard revents != 0, connection != nil else { continue }
            // Handling one watch may remove another, which libdbus then frees: only a watch still there is handled.
            guard !pollSetChanged || watches[entry.key] == entry.watch else { continue }
            var flags: UInt32 = 0
            if revents & Int16(POLLIN) != 0 { flags |= DBUS_WATCH_READABLE.rawValue }
            if revents & Int16(POLLOUT) != 0 { flags |= DBUS_WATCH_WRITABLE.rawValue }
            if revents & Int16(POLLERR) != 0 { flags |= DBUS_WATCH_ERROR.rawValue }
            if revents & Int16(POLLHUP) != 0 { flags |= DBUS_WATCH_HANGUP.rawValue }
            _ = dbus_watch_handle(entry.watch, flags)
        }
    }

    /// Makes the list `pollOnce` polls: the eventfd, then the enabled watches. The lists keep their storage.
    func makePollSet() {
        fds.removeAll(keepingCapacity: true)
        polled.removeAll(keepingCapacity: true)
        fds.append(pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0))
        for (key, watch) in watches where dbus_watch_get_enabled(watch) != 0 {
            let flags = dbus_watch_get_flags(watch)
            var events: Int16 = 0
            if flags & DBUS_WATCH_READABLE.rawValue != 0 { events |= Int16(POLLIN) }
            if flags & DBUS_WATCH_WRITABLE.rawValue != 0 { events |= Int16(POLLOUT) }
            fds.append(pollfd(fd: dbus_watch_get_unix_fd(watch), events: events, revents: 0))
            polled.append((key, watch))
        }
        pollSetChanged = false
    }

    /// The nearest libdbus timeout or call deadline, in milliseconds on the monotonic clock; `Int64.max` for
    /// none. Reads no clock.
    func nearestDeadline() -> Int64 {
        guard !timeouts.isEmpty || !pendingCalls.isEmpty else { return .max }
        var nearest = Int64.max
        for entry in timeouts.values where dbus_timeout_get_enabled(entry.timeout) != 0 {
            nearest = min(nearest, entry.start + Int64(dbus_timeout_get_interval(entry.timeout)))
        }
        if let deadline = nearestCallDeadline() { nearest = min(nearest, deadline) }
        return nearest
    }

    func fireTimeouts() {
        guard !timeouts.isEmpty else { return }
        let now = monotonicMillis()
        // Handling a timeout may add or remove timeouts: the keys are copied, but only when one is due.
        let due = timeouts.values.contains { entry in
            dbus_timeout_get_enabled(entry.timeout) != 0
                && now >= entry.start + Int64(dbus_timeout_get_interval(entry.timeout))
        }
        guard due else { return }
        for key in Array(timeouts.keys) {
            guard let entry = timeouts[key], dbus_timeout_get_enabled(entry.timeout) != 0 else { continue }
            if now >= entry.start + Int64(dbus_timeout_get_interval(entry.timeout)) {
                timeouts[key]?.start = now
                _ = dbus_timeout_handle(entry.timeout)
            }
        }
    }

    // MARK: - libdbus hooks

    /// Installs the watch, timeout, wake-up and filter functions on a freshly opened connection.
    func install(on pointer: OpaquePointer) -> Bool {
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard
            dbus_connection_set_watch_functions(
                pointer,
                { watch, data in
                    let loop = Unmanaged<ConnectionLoop>.fromOpaque(data!).takeUnretainedValue()
                    loop.watches[UnsafeMutableRawPointer(watch!)] = watch!
                    loop.pollSetChanged = true
                    return 1
                },
                { watch, data in
                    let loop = Unmanaged<ConnectionLoop>.fromOpaque(data!).takeUnretainedValue()
                    loop.watches[UnsafeMutableRawPointer(watch!)] = nil
                    loop.pollSetChanged = true
                },
                { _, data in
                    // Enabled or disabled: the list of what to poll changes.
                    Unmanaged<ConnectionLoop>.fromOpaque(data!).takeUnretainedValue().pollSetChanged = true
                },
                context, nil) != 0,
            dbus_connection_set_timeout_functions(
                pointer,
                { timeout, data in
                    let loop = Unmanaged<ConnectionLoop>.fromOpaque(data!).takeUnretainedValue()
                    loop.timeouts[UnsafeMutableRawPointer(timeout!)] = (timeout!, monotonicMillis())
                    return 1
                },
                { timeout, data in
                    let loop = Unmanaged<ConnectionLoop>.fromOpaque(data!).takeUnretainedValue()
                    loop.timeouts[UnsafeMutableRawPointer(timeout!)] = nil
                },
                { timeout, data in
                    let loop = Unmanaged<ConnectionLoop>.fromOpaque(data!).takeUnretainedValue()
                    loop.timeouts[UnsafeMutableRawPointer(timeout!)]?.start = monotonicMillis()
                },
                context, nil) != 0,
            dbus_connection_add_filter(
                pointer,
                { _, message, data in
                    let loop = Unmanaged<ConnectionLoop>.fromOpaque(data!).takeUnretainedValue()
                    loop.handleIncoming(message!)
                    return DBUS_HANDLER_RESULT_HANDLED
                },
                context, nil) != 0
        else { return false }
        // No wake-up function: libdbus calls it when it queues a message or changes its dispatch status, which
        // happens only inside libdbus calls made by the holder of the loop: on the loop thread, after each of which
        // the loop dispatches and polls the watches afresh, or in ``runNow(_:)``, which only sends (a message libdbus
        // cannot write at once enables the write watch, and that wakes the loop). Waking it through the eventfd cost
        // a write, a read and a poll for every message sent.
        return true
    }
}
