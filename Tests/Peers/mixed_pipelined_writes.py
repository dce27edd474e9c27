#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Sends every kind of write to the settings broker one after another without waiting for the replies, then
waits for all of them. ROUNDS rounds under DIR + str(round) + "/", each:

  Apply a=10*n              then Set a=10*n+1                        (a ends 10*n+1)
  Set sub/b=1, Reset sub/   then Apply sub/b=2                       (sub/b ends 2)
  Register secret (secret)  then Set secret='hunter-n'               (never broadcast)
  Register c (s), Set c='y', Unregister c, SetFromString c "'z'"      (c ends 'z')
  Set e=4                   then Apply resetting e                   (e ends without a value)
  Register n (t)            then SetFromString n "5"                 (n ends uint64 5)

Prints each failed call and exits 1 if any failed."""

import sys

import dbus
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

NAME = "io.github.settingsbus.Settings1"
PATH = "/io/github/settingsbus/Settings1"


def main():
    directory, rounds = sys.argv[1], int(sys.argv[2])
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    settings = dbus.Interface(bus.get_object(NAME, PATH, introspect=False), NAME)
    loop = GLib.MainLoop()
    waiting = [0]
    failures = []

    def done(*_):
        waiting[0] -= 1
        if waiting[0] == 0:
            loop.quit()

    def failed(error):
        failures.append(str(error))
        done()

    def call(method, *arguments):
        waiting[0] += 1
        getattr(settings, method)(*arguments, reply_handler=done, error_handler=failed)

    def values(entries):
        return dbus.Dictionary(entries, signature="sv")

    no_options = dbus.Dictionary({}, signature="sv")
    no_keys = dbus.Array([], signature="s")
    for number in range(rounds):
        d = "%s%d/" % (directory, number)
        call("Apply", values({d + "a": dbus.Int32(10 * number)}), no_keys, no_options)
        call("Set", d + "a", dbus.Int32(10 * number + 1, variant_level=1))
        call("Set", d + "sub/b", dbus.Int32(1, variant_level=1))
        call("Reset", d + "sub/")
        call("Apply", values({d + "sub/b": dbus.Int32(2)}), no_keys, no_options)
        call("Register", d + "secret", "s", dbus.String("", variant_level=1),
             dbus.Dictionary({"secret": dbus.Boolean(True)}, signature="sv"))
        call("Set", d + "secret", dbus.String("hunter-%d" % number, variant_level=1))
        call("Register", d + "c", "s", dbus.String("d", variant_level=1), no_options)
        call("Set", d + "c", dbus.String("y", variant_level=1))
        call("Unregister", d + "c", no_options)
        call("SetFromString", d + "c", "'z'")
        call("Set", d + "e", dbus.Int32(4, variant_level=1))
        call("Apply", values({}), dbus.Array([d + "e"], signature="s"), no_options)
        call("Register", d + "n", "t", dbus.UInt64(0, variant_level=1), no_options)
        call("SetFromString", d + "n", "5")
    loop.run()
    for failure in failures:
        print(failure)
    sys.exit(1 if failures else 0)


main()
