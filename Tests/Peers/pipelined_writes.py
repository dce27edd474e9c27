#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Sends writes to the settings broker one after another without waiting for their replies, then waits for
all of them: ROUNDS rounds of Reset of DIR, then Set of DIR + "k" to the round's number. Prints the replies."""

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
    waiting = [2 * rounds]
    failures = []

    def done(*_):
        waiting[0] -= 1
        if waiting[0] == 0:
            loop.quit()

    def failed(error):
        failures.append(str(error))
        done()

    for number in range(rounds):
        settings.Reset(directory, reply_handler=done, error_handler=failed)
        settings.Set(directory + "k", dbus.Int32(number, variant_level=1), reply_handler=done, error_handler=failed)
    loop.run()
    for failure in failures:
        print(failure)
    sys.exit(1 if failures else 0)


main()
