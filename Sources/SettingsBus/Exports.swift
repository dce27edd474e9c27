// SPDX-License-Identifier: Apache-2.0

// Keys, errors and paths are part of the client API: importing SettingsBus is enough to use them.
@_exported public import SettingsModel
