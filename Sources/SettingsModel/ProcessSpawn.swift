// SPDX-License-Identifier: Apache-2.0

import DBus
import Glibc

/// Starts programs with `posix_spawn`: every signal unblocked and at its default action, and no descriptor
/// of this process but those given (whether or not whoever opened one asked for close-on-exec).
package enum ProcessSpawn {
    /// Starts `executable` with `arguments` (without the program name).
    ///
    /// - Parameters:
    ///   - environment: the complete environment, `NAME=value`; nil for this process's own.
    ///   - descriptors: the child's descriptors, by number, each a descriptor of this process (nil for
    ///     `/dev/null`); 0, 1 and 2 are `/dev/null` unless given.
    /// - Returns: the child's pid.
    /// - Throws: a text saying why it cannot be started.
    package static func spawn(
        _ executable: String, _ arguments: [String], environment: [String]? = nil, descriptors: [Int32: Int32?] = [:]
    ) throws(Failure) -> Int32 {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var targets = descriptors
        for standard in Int32(0)...2 where targets[standard] == nil { targets[standard] = .some(nil) }
        for (target, source) in targets.sorted(by: { $0.key < $1.key }) {
            if let source {
                posix_spawn_file_actions_adddup2(&actions, source, target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            }
        }
        guard let closeFrom = addCloseFrom, closeFrom(&actions, (targets.keys.max() ?? 2) + 1) == 0 else {
            throw Failure(
                description: "cannot start \(executable): the C library cannot close a child's other descriptors "
                    + "(posix_spawn_file_actions_addclosefrom_np, glibc 2.34 or newer)")
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup($0) } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = lock.withLock { _ in
            if let envp { return posix_spawn(&pid, executable, &actions, &attributes, argv, envp) }
            return posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        }
        guard result == 0 else {
            throw Failure(description: "cannot start \(executable): \(String(cString: strerror(result)))")
        }
        return pid
    }

    /// How a child ended, from the status `waitpid` gave: its exit status, or the signal that ended it
    /// (`WIFEXITED`, `WEXITSTATUS` and `WTERMSIG`, written out because Swift does not import the macros).
    package static func ending(ofWaitStatus status: Int32) -> (exitStatus: Int32?, signal: Int32?) {
        let signal = status & 0x7f
        return signal == 0 ? ((status >> 8) & 0xff, nil) : (nil, signal)
    }

    /// Why a program cannot be started.
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Serialises starts: a descriptor a thread opens while another starts a child would otherwise not be in
    /// the child, or would be, depending on timing (nothing relies on that, but it keeps starts plain).
    private static let lock = Locked(())

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and newer), which Swift's Glibc module does
    /// not import: looked up by name.
    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
}
