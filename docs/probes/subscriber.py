#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: subscriber.py BROKER SETTINGS_BENCH [CHANGES]  -- one `settings-bench --role subscriber` process:
its CPU and the bus daemon's per change, and the time from before each Set to the subscriber's print."""
import subprocess
import sys
import time

import dbus
from common import Broker, cpu, p

broker, bench = sys.argv[1], sys.argv[2]
changes = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
key = "/probe/subscriber/key"
with Broker(broker) as b:
    b.settings.Set(key, dbus.String("start", variant_level=1))
    subscriber = subprocess.Popen([bench, "--role", "subscriber", "--bus", b.address, "--key", key],
                                  stdout=subprocess.PIPE, text=True)
    try:
        subscriber.stdout.readline()
        before, daemon_before = cpu(subscriber.pid), cpu(b.bus.pid)
        delays = []
        for i in range(changes):
            started = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            b.settings.Set(key, dbus.String(f"v{i}", variant_level=1))
            delays.append(int(subscriber.stdout.readline().split()[1]) - started)
        after, daemon_after = cpu(subscriber.pid), cpu(b.bus.pid)
        print(f"subscriber: user {(after[0] - before[0]) / changes * 1e6:.0f} µs, system "
              f"{(after[1] - before[1]) / changes * 1e6:.0f} µs per change; bus daemon: user "
              f"{(daemon_after[0] - daemon_before[0]) / changes * 1e6:.0f} µs, system "
              f"{(daemon_after[1] - daemon_before[1]) / changes * 1e6:.0f} µs; Set → printed p50 "
              f"{p(delays, .5) / 1e3:.0f} µs")
    finally:
        subscriber.kill()
        subscriber.wait()
