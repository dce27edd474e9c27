#!/bin/sh
# Prints every Changed(path, values, removed, serial, origin) signal for a key or a directory, until
# interrupted. arg0path matches a change of the key itself, or of any key under the directory; sender
# takes only the broker's signals. (dbus-monitor first prints its own NameAcquired and NameLost.)
# Usage: watch.sh [KEY|DIR]              e.g. watch.sh /org/example/   (default: /, everything)
set -eu
exec dbus-monitor --session "type='signal',sender='io.github.settingsbus.Settings1',\
interface='io.github.settingsbus.Settings1',member='Changed',arg0path='${1:-/}'"
