// SPDX-License-Identifier: Apache-2.0

@testable import DBus
import Foundation
import Testing

/// The POSIX threads the binding runs its connections on.
struct ThreadStartTests {
    @Test func aThreadRunsItsBodyUnderItsName() async {
        let name = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            let result = startThread(name: "probe-thread-name-too-long", stackSize: 1 << 20) {
                let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                continuation.resume(returning: comm.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            #expect(result == 0)
        }
        // Linux keeps 15 bytes of a thread's name.
        #expect(name == "probe-thread-na")
    }

    @Test func aThreadThatCannotStartReportsWhyAndNeverRuns() {
        let ran = Locked(false)
        // A stack of 64 TiB cannot be mapped.
        let result = startThread(name: "too-big", stackSize: 1 << 46) { ran.withLock { $0 = true } }
        #expect(result != 0)
        #expect(!ran.withLock { $0 })
    }
}
