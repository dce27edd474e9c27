// SPDX-License-Identifier: Apache-2.0
// The one C header of SettingsBus: libdbus, as Debian's libdbus-1-dev installs it, and the eventfd the
// connection loop wakes itself with (Glibc's module map does not export <sys/eventfd.h>).
#ifndef SETTINGSBUS_CDBUS_SHIM_H
#define SETTINGSBUS_CDBUS_SHIM_H
#include <dbus/dbus.h>
#include <sys/eventfd.h>
#endif
