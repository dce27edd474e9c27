#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: apply.py BROKER [KEYS] [PERF_OUTPUT]  -- one `Apply` of KEYS keys (100,000 by default, in directories of
100 as the benchmark lays them out) on a fresh store: its time from this client and the broker's CPU for it,
from the scheduler. With PERF_OUTPUT, `perf record -g` of the broker around the call writes there."""
import signal
import subprocess
import sys
import time

import dbus
from common import Broker, cpu_ns

broker = sys.argv[1]
keys = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
output = sys.argv[3] if len(sys.argv) > 3 else None
with Broker(broker) as b:
    values = dbus.Dictionary({f"/bench/keys/d{i // 100}/k{i % 100}": dbus.String(f"value of key {i}", variant_level=1)
                              for i in range(keys)}, signature="sv")
    b.peer.Ping()
    perf = None
    if output:
        perf = subprocess.Popen(["perf", "record", "-F", "5000", "-g", "-o", output, "-p", str(b.process.pid)],
                                stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    before, started = cpu_ns(b.process.pid), time.perf_counter()
    b.settings.Apply(values, dbus.Array([], signature="s"), dbus.Dictionary({}, signature="sv"), timeout=120)
    elapsed, used = time.perf_counter() - started, cpu_ns(b.process.pid) - before
    if perf:
        perf.send_signal(signal.SIGINT)
        perf.wait()
    print(f"Apply of {keys} keys: {elapsed * 1e3:.0f} ms from this client, broker CPU {used / 1e6:.0f} ms")
