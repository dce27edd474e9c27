// SPDX-License-Identifier: Apache-2.0

import SettingsModel

extension SchemaFile {
    /// Reads and parses the schema file at `path` (or - for standard input).
    ///
    /// - Throws: ``CtlError`` with status ``ExitStatus/invalid`` naming the file, the line and what is wrong.
    static func read(_ path: String) throws -> [SettingPath: SettingSchema] {
        let text = try LoadCommand.read(path)
        do {
            return try SchemaFile(parsing: text).schemas
        } catch {
            throw CtlError(.invalid, "\(path == "-" ? "standard input" : path): \(error)")
        }
    }
}
