#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: interleave.py BROKER [DIRECTORY]  -- durable Set latency with a pause of 0.8 ms between writes,
and with a dconf-like write (a file written, fsynced, renamed, its directory fsynced) between them instead."""
import os
import shutil
import sys
import tempfile
import time

import dbus
from common import Broker, p

broker = sys.argv[1]
directory = tempfile.mkdtemp(prefix="settingsbus-interleave-", dir=sys.argv[2] if len(sys.argv) > 2 else None)


def other_write():
    temporary = os.path.join(directory, "db.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, os.urandom(2048))
    os.fsync(fd)
    os.close(fd)
    os.rename(temporary, os.path.join(directory, "db"))
    fd = os.open(directory, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


try:
    with Broker(broker) as b:
        for _ in range(3):
            for mode in ("pause", "other write"):
                times = []
                for i in range(300):
                    t = time.perf_counter()
                    b.settings.Set("/probe/key", dbus.Int32(i, variant_level=1))
                    times.append(time.perf_counter() - t)
                    if mode == "pause":
                        time.sleep(0.0008)
                    else:
                        other_write()
                print(f"{mode:12s} Set p50 {p(times, .5) * 1e6:.0f} µs")
finally:
    shutil.rmtree(directory, ignore_errors=True)
