#!/bin/sh
# SetFromString(s key, s text) → t serial: the broker parses the GVariant text against the key's registered
# type, so 0.5, 8 and ['a', 'b'] need no annotations.
# Usage: set-from-string.sh KEY TEXT     e.g. set-from-string.sh /org/example/editor/recent "['a.txt', 'b.txt']"
set -eu
[ $# -eq 2 ] || { echo "usage: $0 KEY TEXT" >&2; exit 2; }
exec busctl --user call io.github.settingsbus.Settings1 /io/github/settingsbus/Settings1 \
    io.github.settingsbus.Settings1 SetFromString ss "$1" "$2"
