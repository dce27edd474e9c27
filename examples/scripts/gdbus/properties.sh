#!/bin/sh
# The properties Serial (t, the store's last commit) and Version (u, the interface version), in one call.
# Usage: properties.sh
set -eu
exec gdbus call --session --dest io.github.settingsbus.Settings1 --object-path /io/github/settingsbus/Settings1 \
    --method org.freedesktop.DBus.Properties.GetAll io.github.settingsbus.Settings1
