#!/bin/sh
# Get(s key) → v: the key's user value, else its registered default, else the error UnknownKey.
# Usage: get.sh KEY                      e.g. get.sh /org/example/editor/theme
set -eu
[ $# -eq 1 ] || { echo "usage: $0 KEY" >&2; exit 2; }
exec dbus-send --session --print-reply=literal --dest=io.github.settingsbus.Settings1 \
    /io/github/settingsbus/Settings1 io.github.settingsbus.Settings1.Get string:"$1"
