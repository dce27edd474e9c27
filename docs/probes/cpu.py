#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: cpu.py BROKER [CALLS]  -- the broker's user and system CPU per Ping, Set and Get."""
import sys
import time

import dbus
from common import Broker, cpu

broker, calls = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5000
with Broker(broker) as b:
    b.settings.Set("/probe/key", dbus.String("start", variant_level=1))
    for label, call in (("Ping", lambda i: b.peer.Ping()),
                        ("Set", lambda i: b.settings.Set("/probe/key", dbus.String(f"value {i}", variant_level=1))),
                        ("Get", lambda i: b.settings.Get("/probe/key"))):
        before, started = cpu(b.process.pid), time.perf_counter()
        for i in range(calls):
            call(i)
        after, ended = cpu(b.process.pid), time.perf_counter()
        print(f"{label}: broker user {(after[0] - before[0]) / calls * 1e6:.0f} µs, system "
              f"{(after[1] - before[1]) / calls * 1e6:.0f} µs per call; {(ended - started) / calls * 1e6:.0f} µs wall")
