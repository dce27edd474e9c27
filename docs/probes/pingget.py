#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: pingget.py BROKER [COUNT] [RUNS]  -- `Peer.Ping` and `Get` from a minimal C client (pingget.c, libdbus
blocking on one thread), alternating: the two p50s and their ratio, RUNS times. Needs gcc."""
import shutil
import subprocess
import sys
import tempfile

import dbus
from common import Broker, compile_probe

broker = sys.argv[1]
count = sys.argv[2] if len(sys.argv) > 2 else "3000"
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
build = tempfile.mkdtemp(prefix="settingsbus-pingget-")
try:
    client = compile_probe("pingget.c", build)
    with Broker(broker) as b:
        b.settings.Set("/probe/key", dbus.String("a value", variant_level=1))
        for _ in range(runs):
            print(subprocess.run([client, b.address, count], capture_output=True, text=True, check=True).stdout.strip())
finally:
    shutil.rmtree(build, ignore_errors=True)
