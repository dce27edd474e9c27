#!/bin/sh
# Set(s key, v value) → t serial. dbus-send writes the value as TYPE:VALUE with a basic type: string:dark,
# int32:12, uint32:4, int64:5, double:0.5, boolean:true, byte:65. For arrays and dictionaries use
# set-from-string.sh, or gdbus (dbus-send cannot put a container in a variant).
# Usage: set.sh KEY TYPE:VALUE           e.g. set.sh /org/example/editor/font-size int32:12
set -eu
[ $# -eq 2 ] || { echo "usage: $0 KEY TYPE:VALUE" >&2; exit 2; }
exec dbus-send --session --print-reply=literal --dest=io.github.settingsbus.Settings1 \
    /io/github/settingsbus/Settings1 io.github.settingsbus.Settings1.Set string:"$1" variant:"$2"
