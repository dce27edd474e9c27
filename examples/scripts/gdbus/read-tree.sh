#!/bin/sh
# ReadTree(s dir) → (a{sv} values, t serial): every key with a value under a directory.
# Usage: read-tree.sh DIR                e.g. read-tree.sh /org/example/
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method io.github.settingsbus.Settings1.ReadTree "$1"
