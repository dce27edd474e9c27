# SPDX-License-Identifier: Apache-2.0
"""Shared by the probes: a private dbus-daemon and a settings-broker on it, both ended on exit."""
import os
import re
import shutil
import subprocess
import tempfile
import time

import dbus

NAME = "io.github.settingsbus.Settings1"
PATH = "/io/github/settingsbus/Settings1"


class Broker:
    """A private bus and a broker with a store in a temporary directory; `with Broker(path) as b:`."""

    def __init__(self, broker, env=None):
        self.work = tempfile.mkdtemp(prefix="settingsbus-probe-")
        self.bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.bus.stdout.readline().strip()
        self.connection = dbus.bus.BusConnection(self.address)
        self.path, self.env, self.process = broker, env, None
        self.start()

    def start(self):
        """Starts the broker; returns the seconds until it owned its name."""
        started = time.perf_counter()
        self.process = subprocess.Popen([self.path, "--bus", self.address, "--store", self.work + "/settings.db"],
                                        stderr=subprocess.DEVNULL, env=dict(os.environ, **(self.env or {})))
        deadline = started + 30
        while not self.connection.name_has_owner(NAME):
            if time.perf_counter() > deadline:
                raise RuntimeError("the broker did not take its name within 30 s")
            time.sleep(0.002)
        obj = self.connection.get_object(NAME, PATH, introspect=False)
        self.settings = dbus.Interface(obj, NAME)
        self.peer = dbus.Interface(obj, "org.freedesktop.DBus.Peer")
        return time.perf_counter() - started

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.stop()
        self.bus.terminate()
        self.bus.wait()
        shutil.rmtree(self.work, ignore_errors=True)


def p(samples, fraction):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def cpu(pid):
    """User and system CPU seconds of a process."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_ns(pid):
    """Nanoseconds a process's threads have run, from the scheduler (exact, unlike the ticks of `cpu`)."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{thread}/schedstat").read().split()[0])
        except FileNotFoundError:
            pass  # the thread ended
    return total


def compile_probe(source, directory, extra=()):
    """Compiles one of the probes' C programs (`source`, next to this file) against libdbus into `directory`;
    returns the executable's path. Needs gcc and pkg-config."""
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "dbus-1"], capture_output=True, text=True,
                           check=True).stdout.split()
    here = os.path.dirname(os.path.abspath(__file__))
    executable = os.path.join(directory, os.path.splitext(source)[0])
    subprocess.run(["gcc", "-O2", os.path.join(here, source), "-o", executable, *extra] + flags, check=True)
    return executable


def callgrind_total(path):
    """The total instruction count of a callgrind profile (its `summary:` or `totals:` line)."""
    for line in open(path):
        match = re.match(r"(?:summary|totals): (\d+)", line)
        if match:
            return int(match.group(1))
    raise RuntimeError(f"no totals in {path}")


def callgrind_control(pid, *arguments):
    """Runs `callgrind_control` on a process under callgrind, e.g. with `--zero`."""
    subprocess.run(["callgrind_control", *arguments, str(pid)], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def callgrind_dump(pid, label, directory, prefix):
    """Has a process under callgrind write its counts since they were last zeroed; returns that profile's path,
    the newest file in `directory` whose name starts with `prefix`."""
    callgrind_control(pid, "--dump=" + label)
    dumps = [os.path.join(directory, name) for name in os.listdir(directory) if name.startswith(prefix)]
    return max(dumps, key=os.path.getmtime)
