#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: readwhilewriting.py BROKER SETTINGS_BENCH [WRITERS]  -- Get latency from a python3-dbus client,
first on an idle broker, then while WRITERS (default 1) `settings-bench --role writer` processes write
durably one after another for 4 s (each write of theirs waits for its answer)."""
import subprocess
import sys
import time

import dbus
from common import Broker, p

broker, bench = sys.argv[1], sys.argv[2]
writers = int(sys.argv[3]) if len(sys.argv) > 3 else 1


def gets(b, seconds):
    times, deadline = [], time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t = time.perf_counter()
        b.settings.Get("/probe/read")
        times.append(time.perf_counter() - t)
    return times


with Broker(broker) as b:
    b.settings.Set("/probe/read", dbus.String("value", variant_level=1))
    idle = gets(b, 2)
    processes = [subprocess.Popen([bench, "--role", "writer", "--system", "settingsbus", "--bus", b.address,
                                   "--prefix", "/probe/writers/", "--id", str(i), "--seconds", "4"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                 for i in range(writers)]
    try:
        for process in processes:
            process.stdout.readline()  # ready
        for process in processes:
            process.stdin.write("go\n")
            process.stdin.flush()
        busy = gets(b, 3)
        done = [process.stdout.readline().split() for process in processes]
    finally:
        for process in processes:
            process.kill()
            process.wait()
    written = sum(int(fields[1]) for fields in done if len(fields) == 5)
    for name, times in (("idle", idle), (f"{writers} writer(s)", busy)):
        print(f"Get, {name}: p50 {p(times, .5) * 1e6:.0f} µs, p99 {p(times, .99) * 1e6:.0f} µs, "
              f"{len(times)} calls")
    print(f"writes acknowledged meanwhile: {written}")
