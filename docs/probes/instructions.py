#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Usage: instructions.py BROKER COMMAND... -- CHANGES [OUT]  -- one subscriber process (COMMAND, e.g.
`.build/release/settings-bench --role subscriber`; `--bus ADDRESS --key KEY` are added, unless COMMAND names
`{bus}` and `{key}` itself, as `minsub {bus} {key}` does)
run under valgrind's callgrind: the instructions it executes per change, counted from its first printed line
on (start-up left out), over CHANGES changes made one after another, each waiting for the subscriber's print.
Instruction counts do not depend on the machine's load, so two builds compare exactly. With OUT, the
callgrind profile is kept there for callgrind_annotate."""
import os
import shutil
import subprocess
import sys
import tempfile

import dbus
from common import Broker, callgrind_control, callgrind_dump, callgrind_total

broker = sys.argv[1]
split = sys.argv.index("--")
command = sys.argv[2:split]
changes = int(sys.argv[split + 1])
out = sys.argv[split + 2] if len(sys.argv) > split + 2 else None
key = "/probe/instructions/key"
work = tempfile.mkdtemp(prefix="settingsbus-instructions-")
profile = os.path.join(work, "callgrind.out")

try:
    with Broker(broker) as b:
        b.settings.Set(key, dbus.String("start", variant_level=1))
        if "{bus}" in command:
            arguments = [c.replace("{bus}", b.address).replace("{key}", key) for c in command]
        else:
            arguments = command + ["--bus", b.address, "--key", key]
        subscriber = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + profile + ".%p", *arguments],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            subscriber.stdout.readline()  # "ready", or the current value
            for i in range(20):  # warm up: first-use paths (metadata, caches) are left out
                b.settings.Set(key, dbus.String(f"warm-{i}", variant_level=1))
                subscriber.stdout.readline()
            callgrind_control(subscriber.pid, "--zero")
            for i in range(changes):
                b.settings.Set(key, dbus.String(f"value-{i}", variant_level=1))
                subscriber.stdout.readline()
            path = callgrind_dump(subscriber.pid, "changes", work, "callgrind.out.")
            print(f"{' '.join(os.path.basename(c) if i == 0 else c for i, c in enumerate(command))}: "
                  f"{callgrind_total(path) / changes:,.0f} instructions per change ({changes} changes)")
            if out:
                shutil.copy(path, out)
        finally:
            subscriber.kill()
            subscriber.wait()
finally:
    shutil.rmtree(work, ignore_errors=True)
