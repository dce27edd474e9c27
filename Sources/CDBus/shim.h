// SPDX-License-Identifier: Apache-2.0
// The one C header of SettingsBus: libdbus, as Debian's libdbus-1-dev installs it, and the eventfd the
// connection loop wakes itself with (Glibc's module map does not export <sys/eventfd.h>), and the name of its
// thread.
#ifndef SETTINGSBUS_CDBUS_SHIM_H
#define SETTINGSBUS_CDBUS_SHIM_H
#include <dbus/dbus.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>

/* Names the calling thread (at most 15 bytes are kept); prctl is variadic, which Swift cannot call. */
static inline void settingsbus_name_thread(const char *name) {
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}
#endif
