#!/bin/sh
# GetMany(as keys) → (a{sv} values, t serial): keys without a value are left out. busctl writes an array as
# its length followed by its elements.
# Usage: get-many.sh KEY...              e.g. get-many.sh /org/example/editor/theme /org/example/editor/font-size
set -eu
[ $# -ge 1 ] || { echo "usage: $0 KEY..." >&2; exit 2; }
exec busctl --user call io.github.settingsbus.Settings1 /io/github/settingsbus/Settings1 \
    io.github.settingsbus.Settings1 GetMany as $# "$@"
