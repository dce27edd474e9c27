#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Sets the example theme with plain dbus-send, as any shell script can; every running follow-theme prints it.
#   examples/theme/set-theme-with-dbus-send.sh dark
set -eu
theme=${1:?usage: set-theme-with-dbus-send.sh light|dark|high-contrast}
exec dbus-send --session --print-reply --dest=io.github.settingsbus.Settings1 \
    /io/github/settingsbus/Settings1 io.github.settingsbus.Settings1.Set \
    string:/io/github/settingsbus/examples/theme "variant:string:$theme"
