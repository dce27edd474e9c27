#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: fsync.py [DIRECTORY]  -- a 24-byte header and a 4 KiB page written and fdatasync'ed, 300 times,
appending to a file and overwriting blocks a file already has (as a write-ahead log commit does)."""
import os
import sys
import time


def run(path, append, count=300, size=1 << 20):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if not append:
            os.write(fd, bytes(size))
            os.fsync(fd)
        times, offset = [], 0
        for _ in range(count):
            t = time.perf_counter()
            os.pwrite(fd, b"h" * 24, offset)
            os.pwrite(fd, b"p" * 4096, offset + 24)
            os.fdatasync(fd)
            times.append(time.perf_counter() - t)
            offset = offset + 4120 if append or offset + 8240 <= size else 0
        times.sort()
        return times[len(times) // 2] * 1e6, times[int(len(times) * .9)] * 1e6
    finally:
        os.close(fd)
        os.unlink(path)


directory = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
for _ in range(2):
    print("appending:   p50 %.0f µs, p90 %.0f µs" % run(os.path.join(directory, "fsync-probe-1"), True))
    print("overwriting: p50 %.0f µs, p90 %.0f µs" % run(os.path.join(directory, "fsync-probe-2"), False))
