// SPDX-License-Identifier: Apache-2.0
// Landlock for the sync process (settings-sync), the process descriptors and socket peers the broker proves a
// caller with, and the broker's use of the C library's allocator: what Swift cannot call (syscall is variadic;
// <malloc.h> is not in Swift's Glibc module; netlink's macros are not imported).
#ifndef SETTINGSBUS_SANDBOX_H
#define SETTINGSBUS_SANDBOX_H

#include <stdint.h>

/// The Landlock ABI version the kernel offers: 1 or more, or 0 when Landlock is not available (a kernel
/// before 5.13, or Landlock not enabled).
int settingsbus_landlock_abi(void);

/// Restricts this process and its future children, for good: files and folders may only be read, and only
/// beneath `paths` (a path that does not exist is skipped); nothing may be written, made, removed or
/// renamed anywhere. With ABI 4 or newer, TCP connections go only to the `port_count` ports in `ports`, and
/// no TCP port may be bound. Sets no_new_privs first.
///
/// Returns 0, or a negative errno (-ENOSYS when Landlock is not available, nothing then being restricted).
int settingsbus_landlock_restrict(const char *const *paths, int path_count, const unsigned short *ports,
                                  int port_count);

/// Accepts a connection on a listening socket, close-on-exec (accept4). Returns the descriptor, or -errno.
int settingsbus_accept(int socket);

/// A process descriptor for `pid` (pidfd_open), close-on-exec: it names that process even after the pid is
/// reused. Returns the descriptor, or -errno (-ESRCH when the process is gone).
int settingsbus_pidfd_open(int pid);

/// Whether the process a pidfd names is still running (pidfd_send_signal with signal 0): 1 when it is, 0 when it
/// has ended (its pid may then name another process), -errno when it cannot be told.
int settingsbus_pidfd_alive(int pidfd);

/// The peers of Unix sockets, from the kernel's socket diagnostics (NETLINK_SOCK_DIAG, UDIAG_SHOW_PEER) of this
/// network namespace: for each connected socket, its inode in `inodes[i]` and its peer's in `peers[i]`, up to
/// `capacity` of them. Returns how many there are (more than `capacity` when the arrays were too small), or
/// -errno.
long settingsbus_unix_socket_peers(uint32_t *inodes, uint32_t *peers, long capacity);

/// The type of the file system that holds `path` (statfs's f_type, such as 0x01021994 for tmpfs), or -errno.
long long settingsbus_file_system_type(const char *path);

/// Has every thread of the process allocate from one malloc arena (mallopt M_ARENA_MAX): an arena per thread
/// keeps each one's free memory resident. Called before the process starts threads of its own.
void settingsbus_one_malloc_arena(void);

/// Gives the allocator's free memory back to the system (malloc_trim), after a burst of work at rest.
void settingsbus_release_free_memory(void);

#endif
