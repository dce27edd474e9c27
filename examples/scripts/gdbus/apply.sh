#!/bin/sh
# Apply(a{sv} set, as reset, a{sv} options) → t serial: sets and resets several keys in one atomic commit with
# one Changed signal. Option if-serial (uint64) makes it a compare-and-set that fails with
# io.github.settingsbus.Settings1.Error.Conflict if a key it touches changed after that serial.
# Usage: apply.sh SETS [RESETS [OPTIONS]]   each in GVariant text, e.g.
#   apply.sh "{'/org/example/editor/theme': <'light'>, '/org/example/editor/font-size': <14>}" \
#            "['/org/example/editor/recent']" "{'if-serial': <uint64 6>}"
set -eu
no_options='@a{sv} {}'
[ $# -ge 1 ] && [ $# -le 3 ] || { echo "usage: $0 SETS [RESETS [OPTIONS]]" >&2; exit 2; }
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method io.github.settingsbus.Settings1.Apply "$1" "${2:-@as []}" "${3:-$no_options}"
