#!/bin/sh
# Set(s key, v value) → t serial. busctl writes a variant as its signature, then the value in busctl's
# notation: s dark, i 12, u 4, d 0.5, b true, as 2 a.txt b.txt, a{sv} 1 width i 800.
# Usage: set.sh KEY SIGNATURE VALUE...   e.g. set.sh /org/example/editor/recent as 2 a.txt b.txt
set -eu
[ $# -ge 3 ] || { echo "usage: $0 KEY SIGNATURE VALUE..." >&2; exit 2; }
key=$1
shift
exec busctl --user call io.github.settingsbus.Settings1 /io/github/settingsbus/Settings1 \
    io.github.settingsbus.Settings1 Set sv "$key" "$@"
