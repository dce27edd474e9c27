#!/bin/sh
# Set(s key, v value) → t serial. The value is GVariant text of any type: 'dark', 12, uint32 4, ['a', 'b'],
# {'width': <800>}; the script puts it in the variant (<…>) that Set takes.
# Usage: set.sh KEY VALUE                e.g. set.sh /org/example/editor/theme "'dark'"
set -eu
[ $# -eq 2 ] || { echo "usage: $0 KEY VALUE" >&2; exit 2; }
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method io.github.settingsbus.Settings1.Set "$1" "<$2>"
