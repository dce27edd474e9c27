#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: apply.py BROKER [KEYS] [--reader] [--perf OUTPUT]  -- one `Apply` of KEYS keys (100,000 by default, in
directories of 100 as the benchmark lays them out) on a fresh store: its time from this client and the broker's
CPU for it (from the scheduler). With --reader, another process calls `Get` one after another meanwhile, and
the slowest of its calls is printed (the broker's CPU then includes serving them). With --perf, `perf record -g`
of the broker around the call writes to OUTPUT."""
import argparse
import signal
import subprocess
import sys
import time

import dbus
from common import NAME, PATH, Broker, cpu_ns

# Calls Get until told to stop (a line on standard input), then prints the count and the slowest, in ms.
READER = r"""
import sys, threading, time, dbus
settings = dbus.Interface(dbus.bus.BusConnection(sys.argv[1]).get_object(sys.argv[2], sys.argv[3], introspect=False),
                          sys.argv[2])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
count, slowest = 0, 0.0
print("ready", flush=True)
while not stop.is_set():
    started = time.perf_counter()
    settings.Get("/probe/key")
    slowest, count = max(slowest, time.perf_counter() - started), count + 1
print(count, f"{slowest * 1e3:.1f}", flush=True)
"""

arguments = argparse.ArgumentParser()
arguments.add_argument("broker")
arguments.add_argument("keys", nargs="?", type=int, default=100_000)
arguments.add_argument("--reader", action="store_true")
arguments.add_argument("--perf", metavar="OUTPUT")
options = arguments.parse_args()
keys, output = options.keys, options.perf
with Broker(options.broker) as b:
    values = dbus.Dictionary({f"/bench/keys/d{i // 100}/k{i % 100}": dbus.String(f"value of key {i}", variant_level=1)
                              for i in range(keys)}, signature="sv")
    b.settings.Set("/probe/key", dbus.String("read meanwhile", variant_level=1))
    reader = None
    if options.reader:
        reader = subprocess.Popen([sys.executable, "-c", READER, b.address, NAME, PATH], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        reader.stdout.readline()
    perf = None
    if output:
        perf = subprocess.Popen(["perf", "record", "-F", "5000", "-g", "-o", output, "-p", str(b.process.pid)],
                                stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    before, started = cpu_ns(b.process.pid), time.perf_counter()
    b.settings.Apply(values, dbus.Array([], signature="s"), dbus.Dictionary({}, signature="sv"), timeout=120)
    elapsed, used = time.perf_counter() - started, cpu_ns(b.process.pid) - before
    meanwhile = ""
    if reader:
        reader.stdin.write("stop\n")
        reader.stdin.flush()
        gets, slowest = reader.stdout.readline().split()
        reader.wait()
        meanwhile = f"; {gets} Gets from another process meanwhile, the slowest {slowest} ms"
    if perf:
        perf.send_signal(signal.SIGINT)
        perf.wait()
    print(f"Apply of {keys} keys: {elapsed * 1e3:.0f} ms from this client, broker CPU {used / 1e6:.0f} ms{meanwhile}")
