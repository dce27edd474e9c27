#!/bin/sh
# Reset(s keyOrDir) → t serial: removes a key's user value, or every user value under a directory.
# Usage: reset.sh KEY|DIR                e.g. reset.sh /org/example/editor/
set -eu
[ $# -eq 1 ] || { echo "usage: $0 KEY|DIR" >&2; exit 2; }
exec dbus-send --session --print-reply=literal --dest=io.github.settingsbus.Settings1 \
    /io/github/settingsbus/Settings1 io.github.settingsbus.Settings1.Reset string:"$1"
