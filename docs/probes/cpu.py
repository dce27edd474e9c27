#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: cpu.py BROKER [CALLS]  -- the broker's CPU per Ping, Set and Get: its total from the scheduler, and
the user / system split from its clock ticks (coarse over few calls)."""
import sys
import time

import dbus
from common import Broker, cpu, cpu_ns

broker, calls = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5000
with Broker(broker) as b:
    b.settings.Set("/probe/key", dbus.String("start", variant_level=1))
    for label, call in (("Ping", lambda i: b.peer.Ping()),
                        ("Set", lambda i: b.settings.Set("/probe/key", dbus.String(f"value {i}", variant_level=1))),
                        ("Get", lambda i: b.settings.Get("/probe/key"))):
        before, before_ns, started = cpu(b.process.pid), cpu_ns(b.process.pid), time.perf_counter()
        for i in range(calls):
            call(i)
        after, after_ns, ended = cpu(b.process.pid), cpu_ns(b.process.pid), time.perf_counter()
        print(f"{label}: broker {(after_ns - before_ns) / calls / 1e3:.1f} µs per call (user {(after[0] - before[0]) / calls * 1e6:.0f} µs, system "
              f"{(after[1] - before[1]) / calls * 1e6:.0f} µs); {(ended - started) / calls * 1e6:.0f} µs wall")
