#!/bin/sh
# ReadTree(s dir) → (a{sv} values, t serial): every key with a value under a directory, here as JSON
# (busctl --json=short), which is easy to read from other programs.
# Usage: read-tree.sh DIR                e.g. read-tree.sh /org/example/
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
exec busctl --user --json=short call io.github.settingsbus.Settings1 /io/github/settingsbus/Settings1 \
    io.github.settingsbus.Settings1 ReadTree s "$1"
