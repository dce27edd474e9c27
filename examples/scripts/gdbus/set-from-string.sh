#!/bin/sh
# SetFromString(s key, s text) → t serial: the broker parses the text against the key's registered type, so
# 0.5, 8 and ['a', 'b'] need no annotations. gdbus would parse a bare argument itself: the script quotes the
# text as a GVariant string.
# Usage: set-from-string.sh KEY TEXT     e.g. set-from-string.sh /org/example/editor/tab-width 8
set -eu
[ $# -eq 2 ] || { echo "usage: $0 KEY TEXT" >&2; exit 2; }
text=$(printf '%s' "$2" | sed -e 's/\\/\\\\/g' -e "s/'/\\\\'/g")
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method io.github.settingsbus.Settings1.SetFromString "$1" "'$text'"
