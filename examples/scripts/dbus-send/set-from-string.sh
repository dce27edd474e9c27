#!/bin/sh
# SetFromString(s key, s text) → t serial: the text is GVariant text, parsed against the key's registered
# type (so 0.5, 8 and ['a', 'b'] need no annotations); an unregistered key takes the type the text has.
# Usage: set-from-string.sh KEY TEXT     e.g. set-from-string.sh /org/example/editor/recent "['a.txt', 'b.txt']"
set -eu
[ $# -eq 2 ] || { echo "usage: $0 KEY TEXT" >&2; exit 2; }
exec dbus-send --session --print-reply=literal --dest=io.github.settingsbus.Settings1 \
    /io/github/settingsbus/Settings1 io.github.settingsbus.Settings1.SetFromString string:"$1" string:"$2"
