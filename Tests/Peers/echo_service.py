#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A python3-dbus peer for the DBus tests: owns a bus name and exports org.example.Py1 at /org/example/Py.

Usage: echo_service.py BUS_NAME
Prints "READY <unique name>" once it owns BUS_NAME, then serves until SIGTERM or until stdin closes.
"""
import sys

import dbus
import dbus.service
from dbus.mainloop.glib import DBusGMainLoop
from gi.repository import GLib

INTERFACE = "org.example.Py1"


class Failure(dbus.DBusException):
    _dbus_error_name = "org.example.Py1.Error.Custom"


class PyObject(dbus.service.Object):
    @dbus.service.method(INTERFACE, in_signature="ii", out_signature="i")
    def Add(self, a, b):
        return a + b

    @dbus.service.method(INTERFACE, in_signature="v", out_signature="v")
    def Echo(self, value):
        return value

    @dbus.service.method(INTERFACE, in_signature="s", out_signature="as")
    def Split(self, text):
        return dbus.Array(text.split(","), signature="s")

    @dbus.service.method(INTERFACE, in_signature="", out_signature="")
    def Fail(self):
        raise Failure("the python peer failed on purpose")

    @dbus.service.method(INTERFACE, in_signature="s", out_signature="")
    def Emit(self, text):
        self.Pinged(text, dbus.UInt32(len(text)))

    @dbus.service.signal(INTERFACE, signature="su")
    def Pinged(self, text, length):
        pass


def main():
    DBusGMainLoop(set_as_default=True)
    bus = dbus.SessionBus()
    PyObject(bus, "/org/example/Py")
    reply = bus.request_name(sys.argv[1], dbus.bus.NAME_FLAG_DO_NOT_QUEUE)
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
