// SPDX-License-Identifier: Apache-2.0

/// Re-exported: the directory a provider serves (``SettingsBusProvider/init(store:directory:name:secretsSpecifier:)``),
/// which the client library leaves out of an app's namespace.
@_exported public import struct SettingsModel.SettingDirectory
