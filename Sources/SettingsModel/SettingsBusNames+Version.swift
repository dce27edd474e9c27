// SPDX-License-Identifier: Apache-2.0

// MARK: - The release's version

extension SettingsBusNames {
    /// The version of this release of SettingsBus, which `settings-broker`, `settingsctl` and `settings-bench`
    /// print for `--version`: `0.1.0`.
    ///
    /// It names the build, not the D-Bus contract: the interface's own version is the broker's `Version`
    /// property (`1`), which changes only with the contract.
    public static let packageVersion = "0.1.0"
}
