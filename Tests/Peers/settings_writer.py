#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A python3-dbus writer for the crash-safety tests: sets keys of its own as fast as it can and prints each
write the broker acknowledged.

Usage: settings_writer.py PREFIX KEYS
Writes the values 1, 2, 3, ... as int64, value v to the key PREFIX/k<v % KEYS>, one call at a time. After
each reply it prints one line and flushes it:
  ack <key> <value> <serial>    the broker answered Set with this serial
  fail <value> <error name>     the call failed (the broker is down or restarting); the same value is tried
                                again at once, so the values of acknowledged writes stay 1, 2, 3, ...
"""
import sys

import dbus

NAME = "io.github.settingsbus.Settings1"
PATH = "/io/github/settingsbus/Settings1"
INTERFACE = "io.github.settingsbus.Settings1"


def main():
    prefix, keys = sys.argv[1], int(sys.argv[2])
    bus = dbus.SessionBus()
    value = 1
    while True:
        key = "%s/k%d" % (prefix, value % keys)
        try:
            serial = bus.call_blocking(NAME, PATH, INTERFACE, "Set", "sv", (key, dbus.Int64(value)), timeout=10)
        except dbus.DBusException as error:
            print("fail %d %s" % (value, error.get_dbus_name()), flush=True)
            continue
        print("ack %s %d %d" % (key, value, int(serial)), flush=True)
        value += 1


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BrokenPipeError):
        pass
