#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A python3-dbus client for the DBus tests: calls org.example.Echo1 at DEST PATH and prints one line per call.

Usage: call_object.py DEST PATH
Each line is "<label> <result>", or "<label> error <D-Bus error name>: <message>".
"""
import sys

import dbus

INTERFACE = "org.example.Echo1"


def attempt(label, function):
    try:
        print("%s %s" % (label, function()))
    except dbus.DBusException as error:
        print("%s error %s: %s" % (label, error.get_dbus_name(), error.get_dbus_message()))


def main():
    bus = dbus.SessionBus()
    proxy = bus.get_object(sys.argv[1], sys.argv[2], introspect=False)
    echo = dbus.Interface(proxy, INTERFACE)
    properties = dbus.Interface(proxy, "org.freedesktop.DBus.Properties")
    attempt("concat", lambda: str(echo.Concat("py", "thon", signature="ss")))
    attempt("echo-int", lambda: repr(echo.Echo(dbus.Int32(42), signature="v")))
    attempt("echo-string", lambda: str(echo.Echo("grüße", signature="v")))
    attempt("echo-dict", lambda: sorted(
        (str(k), int(v)) for k, v in echo.Echo(dbus.Dictionary({"a": 1, "b": 2}, signature="si"), signature="v").items()))
    attempt("fail", lambda: echo.Fail())
    attempt("wrong-args", lambda: echo.Concat(dbus.Int32(1), "x", signature="is"))
    attempt("unknown-method", lambda: echo.Nope(signature=""))
    # A unix file descriptor, which the object cannot take: refused, and the object keeps serving.
    attempt("echo-fd", lambda: echo.Echo(dbus.types.UnixFd(sys.stdin), signature="v"))
    attempt("volume", lambda: int(properties.Get(INTERFACE, "Volume")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
