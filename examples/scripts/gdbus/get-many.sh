#!/bin/sh
# GetMany(as keys) → (a{sv} values, t serial): keys without a value are left out.
# Usage: get-many.sh KEY...              e.g. get-many.sh /org/example/editor/theme /org/example/editor/font-size
set -eu
[ $# -ge 1 ] || { echo "usage: $0 KEY..." >&2; exit 2; }
keys=$(printf "'%s', " "$@")
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method io.github.settingsbus.Settings1.GetMany "[${keys%, }]"
