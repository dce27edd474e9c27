#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: start.py BROKER [KEYS] [STARTS] [OTHER-BROKER]  -- loads KEYS keys (100,000; values 'value of key N')
into a store with BROKER, then starts a broker on that store by D-Bus activation STARTS times (7) and times
each from a `Get` sent to its name to the answer, as settings-bench's start rows do. With OTHER-BROKER, three
rounds of each, alternately, on the same store."""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import dbus
from common import NAME, PATH, Broker

broker, keys = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100000
starts = int(sys.argv[3]) if len(sys.argv) > 3 else 7
brokers = [broker] + sys.argv[4:5]
work = tempfile.mkdtemp(prefix="settingsbus-probe-start-")
store = work + "/settings.db"
key = f"/bench/keys/d{(keys // 2) // 100}/k{(keys // 2) % 100}"

with Broker(broker) as b:
    values = dbus.Dictionary({f"/bench/keys/d{i // 100}/k{i % 100}": dbus.String(f"value of key {i}", variant_level=1)
                              for i in range(keys)}, signature="sv")
    b.settings.Apply(values, dbus.Array([], signature="s"), dbus.Dictionary({}, signature="sv"), timeout=600)
    b.stop()
    for suffix in ("", "-wal"):
        if os.path.exists(b.work + "/settings.db" + suffix):
            shutil.copy(b.work + "/settings.db" + suffix, store + suffix)

os.makedirs(work + "/services")
config = work + "/bus.conf"
with open(config, "w") as f:
    f.write(f"""<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:dir={work}</listen><servicedir>{work}/services</servicedir>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/>
</policy></busconfig>""")
daemon = subprocess.Popen(["dbus-daemon", "--config-file", config, "--nofork", "--print-address=1"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
try:
    connection = dbus.bus.BusConnection(daemon.stdout.readline().strip())
    for round in range(3 if len(brokers) > 1 else 1):
        for path in brokers:
            with open(work + f"/services/{NAME}.service", "w") as f:
                f.write(f"[D-BUS Service]\nName={NAME}\nExec={path} --store {store}\n")
            connection.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                     "ReloadConfig", "", [])
            times = []
            for _ in range(starts):
                started = time.perf_counter()
                connection.call_blocking(NAME, PATH, NAME, "Get", "s", [key], timeout=60)
                times.append((time.perf_counter() - started) * 1e3)
                pid = int(connection.call_blocking("org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                   "org.freedesktop.DBus", "GetConnectionUnixProcessID", "s", [NAME]))
                os.kill(pid, 15)
                while os.path.exists(f"/proc/{pid}"):
                    time.sleep(0.005)
            print(f"{path}: activation → Get answered, ms: {' '.join(f'{t:.0f}' for t in times)};"
                  f" median {statistics.median(times):.0f}")
finally:
    daemon.terminate()
    daemon.wait()
    shutil.rmtree(work, ignore_errors=True)
