#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: compare.py BROKER_A BROKER_B [WRITES] [PAUSE_MS]  -- two broker builds side by side, each on its own
private bus and fresh store: durable Set and Peer.Ping latency, the two builds alternating call by call, with
an optional pause before each call (a pause lets the machine's CPUs go idle, as between a user's writes)."""
import sys
import time

import dbus
from common import Broker, p

a, b = sys.argv[1], sys.argv[2]
writes = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
pause = float(sys.argv[4]) / 1000 if len(sys.argv) > 4 else 0.0
with Broker(a) as first, Broker(b) as second:
    brokers = [first, second]
    sets, pings = [[], []], [[], []]
    for i in range(writes):
        # Which build goes first changes every round.
        for k in ((0, 1) if i % 2 else (1, 0)):
            if pause:
                time.sleep(pause)
            t = time.perf_counter()
            brokers[k].settings.Set("/probe/key", dbus.Int32(i, variant_level=1))
            sets[k].append(time.perf_counter() - t)
            if pause:
                time.sleep(pause)
            t = time.perf_counter()
            brokers[k].peer.Ping()
            pings[k].append(time.perf_counter() - t)
    for k, path in enumerate((a, b)):
        print(f"{path}: Set p50 {p(sets[k], .5) * 1e6:.0f} µs p90 {p(sets[k], .9) * 1e6:.0f} µs; "
              f"Ping p50 {p(pings[k], .5) * 1e6:.0f} µs")
