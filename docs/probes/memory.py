#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: memory.py BROKER [KEYS]  -- loads KEYS keys as the benchmark does (directories of 100, values
'value of key N'), restarts the broker, makes 200 writes, and prints its memory and largest mappings."""
import re
import sys
import time

import dbus
from common import Broker

broker, keys = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 100000
with Broker(broker) as b:
    values = dbus.Dictionary({f"/bench/keys/d{i // 100}/k{i % 100}": dbus.String(f"value of key {i}", variant_level=1)
                              for i in range(keys)}, signature="sv")
    t = time.perf_counter()
    b.settings.Apply(values, dbus.Array([], signature="s"), dbus.Dictionary({}, signature="sv"), timeout=600)
    print(f"load: {time.perf_counter() - t:.2f} s")
    b.stop()
    print(f"start → name owned: {b.start() * 1e3:.0f} ms")
    for i in range(200):
        b.settings.Set("/bench/write", dbus.Int32(i, variant_level=1))
    status = open(f"/proc/{b.process.pid}/status").read()
    for field in ("VmRSS", "RssAnon", "RssFile"):
        print(re.search(field + r":\s+\d+ kB", status).group(0))
    resident, mapping = {}, None
    for line in open(f"/proc/{b.process.pid}/smaps"):
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            parts = line.split()
            mapping = parts[5] if len(parts) > 5 else "[anonymous]"
        elif line.startswith("Rss:"):
            resident[mapping] = resident.get(mapping, 0) + int(line.split()[1])
    for mapping, kib in sorted(resident.items(), key=lambda item: -item[1])[:10]:
        print(f"{kib:8d} kB  {mapping}")
