// SPDX-License-Identifier: Apache-2.0
// GIO, for the GSettings backend module (CGSettingsBackend): its flags come from `pkg-config gio-2.0`.
#define G_SETTINGS_ENABLE_BACKEND
#include <gio/gio.h>
#include <gio/gsettingsbackend.h>
