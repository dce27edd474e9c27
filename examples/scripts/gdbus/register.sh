#!/bin/sh
# Register(s key, s signature, v default, a{sv} options): the key's type and default, with options summary,
# description, range ((min, max)), choices (an array) and secret (b). Registering again the same way does
# nothing; differently, it fails with io.github.settingsbus.Settings1.Error.SchemaConflict.
# Usage: register.sh KEY SIGNATURE DEFAULT [OPTIONS]   DEFAULT and OPTIONS in GVariant text, e.g.
#   register.sh /org/example/editor/tab-width u "uint32 4" "{'summary': <'Spaces per tab'>, 'range': <(uint32 1, uint32 16)>}"
set -eu
no_options='@a{sv} {}'
[ $# -ge 3 ] && [ $# -le 4 ] || { echo "usage: $0 KEY SIGNATURE DEFAULT [OPTIONS]" >&2; exit 2; }
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method io.github.settingsbus.Settings1.Register "$1" "$2" "<$3>" "${4:-$no_options}"
