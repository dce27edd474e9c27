#!/bin/sh
# Apply(a{sv} set, as reset, a{sv} options) → t serial: one atomic commit with one Changed signal. This
# recipe sets keys of basic types and resets nothing; with IF_SERIAL set in the environment it is a
# compare-and-set (option if-serial) that fails with io.github.settingsbus.Settings1.Error.Conflict if a key
# it touches changed after that serial.
# Usage: [IF_SERIAL=N] apply.sh KEY SIGNATURE VALUE [KEY SIGNATURE VALUE]...
#   e.g. apply.sh /org/example/editor/theme s light /org/example/editor/font-size i 14
set -eu
[ $# -ge 3 ] && [ $(($# % 3)) -eq 0 ] || { echo "usage: $0 KEY SIGNATURE VALUE [KEY SIGNATURE VALUE]..." >&2; exit 2; }
count=$(($# / 3))
if [ -n "${IF_SERIAL:-}" ]; then
    set -- "$@" 0 1 if-serial t "$IF_SERIAL"
else
    set -- "$@" 0 0
fi
exec busctl --user call io.github.settingsbus.Settings1 /io/github/settingsbus/Settings1 \
    io.github.settingsbus.Settings1 Apply 'a{sv}asa{sv}' "$count" "$@"
