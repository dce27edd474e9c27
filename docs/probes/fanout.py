#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: fanout.py BROKER SETTINGS_BENCH [SUBSCRIBERS] [ROUNDS] [KINDS] [PAUSE_MS]  -- the time from before a
Set until all subscribers have printed the change, and the CPU each subscriber and the bus daemon spend per
change, with PAUSE_MS (10 by default) between changes, and subscriber processes of these kinds (KINDS: a
comma-separated choice, all by default):
  minsub          minsub.c (C, libdbus, one thread)
  minsub hop      the same, handing each change to a second thread (a condition variable)
  connection      settings-bench --role subscriber --layer connection: a DBusConnection's signal handler
                  prints on the connection's thread (no store, no stream)
  stream          --layer stream: the handler yields into an AsyncStream that a task on the global
                  executor prints from
  store           settings-bench --role subscriber: values(for:) of a BusSettingsStore, consumed on the
                  global executor (what the benchmark measures)
  store executor  the same, consumed in a task preferring the store's executor (the connection's thread)
  changes         --stream changes: changes(for:) of a BusSettingsStore, consumed on the global executor
A kind other than the first two may name another settings-bench binary after an `@`, to compare two builds side by
side: `store@/tmp/old/settings-bench,store` alternates an older build's subscribers with this one's.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import dbus
from common import Broker, compile_probe, cpu_ns, p

broker, bench = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 50
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 40
pause = float(sys.argv[6]) / 1000 if len(sys.argv) > 6 else 0.01
build = tempfile.mkdtemp(prefix="settingsbus-fanout-")
minsub = compile_probe("minsub.c", build, ["-lpthread"])

key = "/probe/fanout/key"


def measure(b, kind):
    kind, _, binary = kind.partition("@")
    subscriber = [binary or bench, "--role", "subscriber", "--bus", b.address, "--key", key]
    command = {
        "minsub": [minsub, b.address, key],
        "minsub hop": [minsub, b.address, key, "hop"],
        "connection": subscriber + ["--layer", "connection"],
        "stream": subscriber + ["--layer", "stream"],
        "store": subscriber,
        "store executor": subscriber + ["--executor", "connection"],
        "changes": subscriber + ["--stream", "changes"],
    }[kind]
    subscribers = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    try:
        for s in subscribers:
            s.stdout.readline()  # "ready", or the current value
        times = []
        before = sum(cpu_ns(s.pid) for s in subscribers), cpu_ns(b.bus.pid)
        for r in range(rounds):
            started = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            b.settings.Set(key, dbus.String(f"{kind}-{r}", variant_level=1))
            last = max(int(s.stdout.readline().split()[-1]) for s in subscribers)
            times.append((last - started) / 1e6)
            time.sleep(pause)
        after = sum(cpu_ns(s.pid) for s in subscribers), cpu_ns(b.bus.pid)
        label = f"{kind} ({binary})" if binary else kind
        print(f"{label} × {count}: p50 {p(times, .5):.2f} ms, p90 {p(times, .9):.2f} ms; CPU per change: "
              f"{(after[0] - before[0]) / rounds / count / 1e3:.0f} µs each subscriber, "
              f"{(after[1] - before[1]) / rounds / 1e3:.0f} µs the bus daemon")
    finally:
        for s in subscribers:
            s.kill()
            s.wait()


try:
    with Broker(broker) as b:
        b.settings.Set(key, dbus.String("start", variant_level=1))
        kinds = sys.argv[5].split(",") if len(sys.argv) > 5 else [
            "minsub", "minsub hop", "connection", "stream", "store", "store executor", "changes"]
        for kind in kinds:
            measure(b, kind)
finally:
    shutil.rmtree(build, ignore_errors=True)
