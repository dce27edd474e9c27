#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: brokerinstructions.py BROKER [COUNT] [KINDS]  -- the instructions the broker executes per call, under
valgrind's callgrind, for each of KINDS (default Ping,Get,Set): COUNT calls of one kind from a minimal C client
(calls.c), one after another, counted from after 200 warm-up calls. Instruction counts do not move with the
machine's load, so two builds compare exactly. Needs gcc and valgrind."""
import os
import shutil
import subprocess
import sys
import tempfile

import dbus
from common import Broker, callgrind_control, callgrind_dump, callgrind_total, compile_probe

broker = os.path.abspath(sys.argv[1])
count = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
kinds = sys.argv[3].split(",") if len(sys.argv) > 3 else ["Ping", "Get", "Set"]
work = tempfile.mkdtemp(prefix="settingsbus-brokerinstructions-")

try:
    client = compile_probe("calls.c", work)
    wrapper = os.path.join(work, "broker-under-callgrind")
    with open(wrapper, "w") as script:
        script.write(f"#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file={work}/callgrind.%p "
                     f"{broker} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    with Broker(wrapper) as b:
        b.settings.Set("/probe/key", dbus.String("a value", variant_level=1))
        pid = b.process.pid
        for kind in kinds:
            subprocess.run([client, b.address, kind, "200"], check=True)
            callgrind_control(pid, "--zero")
            subprocess.run([client, b.address, kind, str(count)], check=True)
            latest = callgrind_dump(pid, kind, work, f"callgrind.{pid}.")
            print(f"{kind}: {callgrind_total(latest) / count:,.0f} instructions per call in the broker")
finally:
    shutil.rmtree(work, ignore_errors=True)
