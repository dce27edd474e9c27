#!/bin/sh
# List(s dir) → as: the keys and subdirectories (ending in '/') directly under a directory.
# Usage: list.sh DIR                     e.g. list.sh /org/example/editor/
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method io.github.settingsbus.Settings1.List "$1"
