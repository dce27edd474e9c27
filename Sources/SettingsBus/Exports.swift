// SPDX-License-Identifier: Apache-2.0

// An app's namespace holds the names apps use, and no more: `import SettingsBus` brings the client library's
// own names and, of SettingsModel, the path of a key and the error every call throws. Everything else of
// SettingsModel (directories, schemas, the snapshots and updates a store is made of) and of DBus (the values a
// representation of the app's own maps to) is imported by the code that needs it. `AppNamespaceTests` lists
// the names and fails when one appears that is not listed.

/// Re-exported: the path of a key (``SettingKey/path``).
@_exported public import struct SettingsModel.SettingPath
/// Re-exported: the error of every call.
@_exported public import struct SettingsModel.SettingsError
