#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A python3-dbus peer that takes the broker's name and answers with text chosen to attack a terminal, for
the settingsctl tests of what it prints.

Usage: hostile_broker.py TEXT
Owns io.github.settingsbus.Settings1 and answers: Properties.GetAll (Version 5, Serial 1), Status (store,
problem and health holding TEXT), List (names holding TEXT, and one plain name), and every Get with an error
whose message holds TEXT. Prints "READY <unique name>" once it owns the name, then serves until stdin closes.
"""
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

NAME = "io.github.settingsbus.Settings1"
PATH = "/io/github/settingsbus/Settings1"
INTERFACE = "io.github.settingsbus.Settings1"


class Failure(dbus.DBusException):
    _dbus_error_name = INTERFACE + ".Error.Failed"


class HostileBroker(dbus.service.Object):
    def __init__(self, bus, text):
        super().__init__(bus, PATH)
        self.text = text

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="s", out_signature="a{sv}")
    def GetAll(self, interface):
        return dbus.Dictionary({"Version": dbus.UInt32(5), "Serial": dbus.UInt64(1)}, signature="sv")

    @dbus.service.method(dbus.PROPERTIES_IFACE, in_signature="ss", out_signature="v")
    def Get(self, interface, name):
        return self.GetAll(interface)[name]

    @dbus.service.method(INTERFACE, in_signature="", out_signature="a{sv}")
    def Status(self):
        return dbus.Dictionary({
            "store": "/tmp/store" + self.text, "problem": self.text, "health": "ok" + self.text,
            "keys": dbus.UInt32(1)}, signature="sv")

    @dbus.service.method(INTERFACE, in_signature="s", out_signature="as")
    def List(self, directory):
        return dbus.Array(["name" + self.text, "plain"], signature="s")

    @dbus.service.method(INTERFACE, in_signature="s", out_signature="v")
    def Get(self, key):
        raise Failure("refused" + self.text)


def main():
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    HostileBroker(bus, sys.argv[1])
    reply = bus.request_name(NAME, dbus.bus.NAME_FLAG_DO_NOT_QUEUE)
    if reply != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
        print("NAME-REFUSED %d" % reply, flush=True)
        return 1
    loop = GLib.MainLoop()
    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP, lambda *_: loop.quit() or False)
    print("READY %s" % bus.get_unique_name(), flush=True)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
