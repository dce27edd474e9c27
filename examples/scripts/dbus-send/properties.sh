#!/bin/sh
# The properties Serial (t, the store's last commit) and Version (u, the interface version).
# Usage: properties.sh
set -eu
for property in Serial Version; do
    dbus-send --session --print-reply=literal --dest=io.github.settingsbus.Settings1 \
        /io/github/settingsbus/Settings1 org.freedesktop.DBus.Properties.Get \
        string:io.github.settingsbus.Settings1 string:"$property"
done
