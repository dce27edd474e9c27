#!/bin/sh
# Prints every signal of the broker's object, one line each, until interrupted: the Changed(path, values,
# removed, serial, origin) signal of every commit. gdbus first says which connection owns the name; a line
# "The name … does not have an owner" means no broker runs yet (gdbus monitor does not start one).
# To follow only some keys, filter the lines (grep "Changed ('/org/example/"), or use dbus-monitor with
# arg0path (../dbus-send/watch.sh), which has the bus daemon filter them.
# Usage: watch.sh
set -eu
exec gdbus monitor --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1
