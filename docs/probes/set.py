#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: set.py BROKER [WRITES]  -- durable Set and Peer.Ping latency on a fresh store (python3-dbus)."""
import sys
import time

import dbus
from common import Broker, p

broker, writes = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 400
with Broker(broker) as b:
    sets, pings = [], []
    for i in range(writes):
        t = time.perf_counter()
        b.settings.Set("/probe/key", dbus.Int32(i, variant_level=1))
        sets.append(time.perf_counter() - t)
        t = time.perf_counter()
        b.peer.Ping()
        pings.append(time.perf_counter() - t)
    print(f"Set p50 {p(sets, .5) * 1e6:.0f} µs p90 {p(sets, .9) * 1e6:.0f} µs; Ping p50 {p(pings, .5) * 1e6:.0f} µs")
