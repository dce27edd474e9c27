#!/bin/sh
# ReadTree(s dir) → (a{sv} values, t serial): every key with a value under a directory.
# Usage: read-tree.sh DIR                e.g. read-tree.sh /org/example/
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
exec dbus-send --session --print-reply=literal --dest=io.github.settingsbus.Settings1 \
    /io/github/settingsbus/Settings1 io.github.settingsbus.Settings1.ReadTree string:"$1"
