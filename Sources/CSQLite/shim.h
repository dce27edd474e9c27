// SPDX-License-Identifier: Apache-2.0
// The SQLite C API, from Debian's libsqlite3-dev, for the broker's store.
#ifndef SETTINGSBUS_CSQLITE_SHIM_H
#define SETTINGSBUS_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
