#!/bin/sh
# Register(s key, s signature, v default, a{sv} options), for a key of a basic type, with a summary and an
# optional range: the broker then refuses values of another type or out of the range.
# Usage: register.sh KEY SIGNATURE DEFAULT SUMMARY [MIN MAX]
#   e.g. register.sh /org/example/editor/tab-width u 4 "Spaces per tab" 1 16
set -eu
[ $# -eq 4 ] || [ $# -eq 6 ] || { echo "usage: $0 KEY SIGNATURE DEFAULT SUMMARY [MIN MAX]" >&2; exit 2; }
key=$1 signature=$2 default=$3 summary=$4
if [ $# -eq 6 ]; then
    set -- 2 summary s "$summary" range "($signature$signature)" "$5" "$6"
else
    set -- 1 summary s "$summary"
fi
exec busctl --user call io.github.settingsbus.Settings1 /io/github/settingsbus/Settings1 \
    io.github.settingsbus.Settings1 Register ssva{sv} "$key" "$signature" "$signature" "$default" "$@"
