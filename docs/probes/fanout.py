#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: fanout.py BROKER SETTINGS_BENCH [SUBSCRIBERS] [ROUNDS]  -- the time from before a Set until all
subscribers have printed the change, with subscriber processes of four kinds: minsub.c (C, one thread),
`minsub … hop` (C, a hand-off to a second thread), `settings-bench --role subscriber` (SettingsBus, the
stream consumed on the global executor) and the same with `--executor connection` (consumed on the
connection's thread)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import dbus
from common import Broker, cpu_ns, p

broker, bench = sys.argv[1], sys.argv[2]
count = int(sys.argv[3]) if len(sys.argv) > 3 else 50
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 40
here = os.path.dirname(os.path.abspath(__file__))
build = tempfile.mkdtemp(prefix="settingsbus-fanout-")
flags = subprocess.run(["pkg-config", "--cflags", "--libs", "dbus-1"], capture_output=True, text=True, check=True).stdout.split()
subprocess.run(["gcc", "-O2", os.path.join(here, "minsub.c"), "-o", os.path.join(build, "minsub"), "-lpthread"] + flags,
               check=True)

key = "/probe/fanout/key"


def measure(b, kind):
    command = {
        "minsub": [os.path.join(build, "minsub"), b.address, key],
        "minsub hop": [os.path.join(build, "minsub"), b.address, key, "hop"],
        "settings-bench": [bench, "--role", "subscriber", "--bus", b.address, "--key", key],
        "settings-bench executor": [bench, "--role", "subscriber", "--bus", b.address, "--key", key,
                                    "--executor", "connection"],
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
            time.sleep(0.01)
        after = sum(cpu_ns(s.pid) for s in subscribers), cpu_ns(b.bus.pid)
        print(f"{kind} × {count}: p50 {p(times, .5):.2f} ms, p90 {p(times, .9):.2f} ms; CPU per change: "
              f"{(after[0] - before[0]) / rounds / count / 1e3:.0f} µs each subscriber, "
              f"{(after[1] - before[1]) / rounds / 1e3:.0f} µs the bus daemon")
    finally:
        for s in subscribers:
            s.kill()
            s.wait()


try:
    with Broker(broker) as b:
        b.settings.Set(key, dbus.String("start", variant_level=1))
        for kind in ("minsub", "minsub hop", "settings-bench", "settings-bench executor"):
            measure(b, kind)
finally:
    shutil.rmtree(build, ignore_errors=True)
