// SPDX-License-Identifier: Apache-2.0
// The GSettings backend `settingsbus` is a GIO module: GIO finds it by its file and calls the three functions
// every GIO module exports (g_io_module_load, g_io_module_unload, g_io_module_query). Nothing else is public.
#pragma once
