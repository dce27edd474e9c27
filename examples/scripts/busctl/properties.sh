#!/bin/sh
# The properties Serial (t, the store's last commit) and Version (u, the interface version).
# Usage: properties.sh
set -eu
exec busctl --user get-property io.github.settingsbus.Settings1 /io/github/settingsbus/Settings1 \
    io.github.settingsbus.Settings1 Serial Version
