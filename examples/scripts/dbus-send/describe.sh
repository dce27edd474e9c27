#!/bin/sh
# Describe(s key) → a{sv}: signature, default, value, summary, range, choices, writable, serial, …
# Usage: describe.sh KEY                 e.g. describe.sh /org/example/editor/tab-width
set -eu
[ $# -eq 1 ] || { echo "usage: $0 KEY" >&2; exit 2; }
exec dbus-send --session --print-reply=literal --dest=io.github.settingsbus.Settings1 \
    /io/github/settingsbus/Settings1 io.github.settingsbus.Settings1.Describe string:"$1"
