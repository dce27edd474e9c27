#!/bin/sh
# Get(s key) → v: the key's user value, else its registered default, else the error UnknownKey.
# gdbus prints the reply as a GVariant tuple: (<'dark'>,)
# Usage: get.sh KEY                      e.g. get.sh /org/example/editor/theme
set -eu
[ $# -eq 1 ] || { echo "usage: $0 KEY" >&2; exit 2; }
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method io.github.settingsbus.Settings1.Get "$1"
