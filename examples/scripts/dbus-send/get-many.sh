#!/bin/sh
# GetMany(as keys) → (a{sv} values, t serial): keys without a value are left out.
# Usage: get-many.sh KEY...              e.g. get-many.sh /org/example/editor/theme /org/example/editor/font-size
# dbus-send writes an array as array:string:ITEM,ITEM (so a key cannot contain a comma, which keys never do).
set -eu
[ $# -ge 1 ] || { echo "usage: $0 KEY..." >&2; exit 2; }
keys=$(printf '%s,' "$@")
exec dbus-send --session --print-reply=literal --dest=io.github.settingsbus.Settings1 \
    /io/github/settingsbus/Settings1 io.github.settingsbus.Settings1.GetMany array:string:"${keys%,}"
