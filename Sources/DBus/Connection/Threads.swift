// SPDX-License-Identifier: Apache-2.0

internal import CDBus
internal import Glibc

/// Starts a detached POSIX thread that runs `body`. Foundation's `Thread` would do the same, but loading
/// Foundation costs a process several megabytes of resident memory, and the broker needs nothing else of it.
///
/// - Parameters:
///   - name: the thread's name as `top -H` and debuggers show it (at most 15 bytes are kept).
///   - stackSize: the thread's stack, in bytes.
/// - Returns: 0, or the error number of `pthread_create` (`EAGAIN` when the system's limit on threads or
///   memory is reached), in which case `body` never runs.
func startThread(name: String, stackSize: Int, _ body: @escaping @Sendable () -> Void) -> Int32 {
    final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, stackSize)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(&thread, &attributes, { argument in
        let start = Unmanaged<Start>.fromOpaque(argument!).takeRetainedValue()
        settingsbus_name_thread(start.name)
        start.body()
        return nil
    }, start)
    if result != 0 { Unmanaged<Start>.fromOpaque(start).release() }
    return result
}
