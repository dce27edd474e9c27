#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A python3-dbus client for the broker tests: makes one call to io.github.settingsbus.Settings1 and prints
its outcome.

Usage: settings_call.py METHOD SIGNATURE ARGUMENTS
ARGUMENTS is a Python expression for the tuple of arguments. Besides `dbus`, it may use
  nested(depth)    a value nested 2 * depth levels deep: variants holding one-field structs
  variants(depth)  an int32 inside depth - 1 variants, sent as a variant (depth variants in all)
  blob(size)       a byte array of size bytes
METHOD may name another interface's method in full, as org.freedesktop.DBus.Properties.Get.
Prints one line: "ok <reply>" or "error <D-Bus error name>: <message>".
"""
import sys

import dbus

NAME = "io.github.settingsbus.Settings1"
PATH = "/io/github/settingsbus/Settings1"


def nested(depth):
    value = dbus.Int32(1)
    for _ in range(depth):
        value = dbus.Struct((value,), signature=None, variant_level=1)
    return value


def variants(depth):
    return dbus.Int32(1, variant_level=depth)


def blob(size):
    return dbus.ByteArray(b"\x00" * size)


def main():
    method, signature, expression = sys.argv[1:4]
    interface, _, member = method.rpartition(".")
    arguments = eval(expression, {"dbus": dbus, "nested": nested, "variants": variants, "blob": blob})
    bus = dbus.SessionBus()
    proxy = bus.get_object(NAME, PATH, introspect=False)
    call = proxy.get_dbus_method(member, interface or NAME)
    try:
        print("ok %r" % (call(*arguments, signature=signature, timeout=30),))
    except dbus.exceptions.DBusException as error:
        print("error %s: %s" % (error.get_dbus_name(), error.get_dbus_message()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
