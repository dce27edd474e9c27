// SPDX-License-Identifier: Apache-2.0
#define _GNU_SOURCE
#include "settingsbus_sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

// The parts of the Landlock ABI that headers older than the kernel may lack (Debian 12's stop at ABI 2).
#define SB_FS_TRUNCATE (1ULL << 14)
#define SB_FS_IOCTL_DEV (1ULL << 15)
#define SB_NET_BIND_TCP (1ULL << 0)
#define SB_NET_CONNECT_TCP (1ULL << 1)
#define SB_RULE_NET_PORT 2

struct sb_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
};

struct sb_net_port_attr {
    uint64_t allowed_access;
    uint64_t port;
};

int settingsbus_landlock_abi(void) {
    long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    return abi < 0 ? 0 : (int)abi;
}

int settingsbus_landlock_restrict(const char *const *paths, int path_count, const unsigned short *ports,
                                  int port_count) {
    int abi = settingsbus_landlock_abi();
    if (abi < 1) return -ENOSYS;
    // Every right the kernel knows of is handled, so that none is left allowed by default.
    uint64_t fs = (1ULL << 13) - 1;  // ABI 1: EXECUTE through MAKE_SYM
    if (abi >= 2) fs |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) fs |= SB_FS_TRUNCATE;
    if (abi >= 5) fs |= SB_FS_IOCTL_DEV;
    struct sb_ruleset_attr attr = {.handled_access_fs = fs, .handled_access_net = 0};
    size_t size = sizeof(uint64_t);
    if (abi >= 4) {
        attr.handled_access_net = SB_NET_BIND_TCP | SB_NET_CONNECT_TCP;
        size = sizeof(attr);
    }
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
    if (ruleset < 0) return -errno;
    int result = 0;
    const uint64_t file_read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_EXECUTE;
    const uint64_t folder_read = file_read | LANDLOCK_ACCESS_FS_READ_DIR;
    for (int i = 0; i < path_count && result == 0; i++) {
        int fd = open(paths[i], O_PATH | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat info;
        if (fstat(fd, &info) == 0) {
            struct landlock_path_beneath_attr rule = {
                .allowed_access = S_ISDIR(info.st_mode) ? folder_read : file_read,
                .parent_fd = fd,
            };
            if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) != 0) result = -errno;
        }
        close(fd);
    }
    for (int i = 0; abi >= 4 && i < port_count && result == 0; i++) {
        struct sb_net_port_attr rule = {.allowed_access = SB_NET_CONNECT_TCP, .port = ports[i]};
        if (syscall(SYS_landlock_add_rule, ruleset, SB_RULE_NET_PORT, &rule, 0) != 0) result = -errno;
    }
    if (result == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) result = -errno;
    if (result == 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) result = -errno;
    close(ruleset);
    return result;
}

int settingsbus_accept(int socket) {
    int descriptor;
    do {
        descriptor = accept4(socket, NULL, NULL, SOCK_CLOEXEC);
    } while (descriptor < 0 && errno == EINTR);
    return descriptor < 0 ? -errno : descriptor;
}

int settingsbus_pidfd_open(int pid) {
    long descriptor = syscall(SYS_pidfd_open, (pid_t)pid, 0);
    return descriptor < 0 ? -errno : (int)descriptor;
}

int settingsbus_pidfd_alive(int pidfd) {
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0) return 1;
    return errno == ESRCH ? 0 : -errno;
}

void settingsbus_one_malloc_arena(void) {
    mallopt(M_ARENA_MAX, 1);
}

void settingsbus_release_free_memory(void) {
    malloc_trim(0);
}

long settingsbus_unix_socket_peers(uint32_t *inodes, uint32_t *peers, long capacity) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) return -errno;
    struct {
        struct nlmsghdr header;
        struct unix_diag_req request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    message.request.sdiag_family = AF_UNIX;
    message.request.udiag_states = (uint32_t)-1;
    message.request.udiag_show = UDIAG_SHOW_PEER;
    if (send(fd, &message, sizeof message, 0) < 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    long count = 0;
    static _Thread_local union {
        struct nlmsghdr header;
        char bytes[65536];
    } buffer;
    for (;;) {
        ssize_t got = recv(fd, buffer.bytes, sizeof buffer.bytes, 0);
        if (got < 0) {
            if (errno == EINTR) continue;
            int error = errno;
            close(fd);
            return -error;
        }
        if (got == 0) break;
        int left = (int)got;
        for (struct nlmsghdr *header = &buffer.header; NLMSG_OK(header, left); header = NLMSG_NEXT(header, left)) {
            if (header->nlmsg_type == NLMSG_DONE) {
                close(fd);
                return count;
            }
            if (header->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *failure = NLMSG_DATA(header);
                close(fd);
                return failure->error < 0 ? failure->error : -EIO;
            }
            if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
            const struct unix_diag_msg *socket_message = NLMSG_DATA(header);
            int length = (int)header->nlmsg_len - (int)NLMSG_LENGTH(sizeof *socket_message);
            uint32_t peer = 0;
            for (struct rtattr *attribute = (struct rtattr *)(socket_message + 1); RTA_OK(attribute, length);
                 attribute = RTA_NEXT(attribute, length)) {
                if (attribute->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(attribute) >= sizeof(uint32_t)) {
                    memcpy(&peer, RTA_DATA(attribute), sizeof peer);
                }
            }
            if (peer == 0) continue;
            if (count < capacity) {
                inodes[count] = socket_message->udiag_ino;
                peers[count] = peer;
            }
            count++;
        }
    }
    close(fd);
    return count;
}

long long settingsbus_file_system_type(const char *path) {
    struct statfs system;
    if (statfs(path, &system) != 0) return -errno;
    return (long long) system.f_type;
}
