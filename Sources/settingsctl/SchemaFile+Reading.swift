// SPDX-License-Identifier: Apache-2.0

import SettingsModel

extension SchemaFile {
    /// Reads and parses the schema file at `path` (or - for standard input).
    ///
    /// - Throws: ``CtlError`` with status ``ExitStatus/invalid`` naming the file, the line and what is wrong.
    static func read(_ path: String) throws -> [SettingPath: SettingSchema] {
        // Within the broker's bound on a schema file (FileBounds): it would refuse a larger one.
        let text: String
        do throws(FileProblem) {
            text = try path == "-"
                ? BoundedFile.read(descriptor: 0, name: "standard input") : BoundedFile.read(path, regularOnly: false)
        } catch {
            throw CtlError(error.message.hasPrefix("cannot be read") ? .failure : .invalid, error.description)
        }
        do {
            return try SchemaFile(parsing: text).schemas
        } catch {
            throw CtlError(.invalid, "\(path == "-" ? "standard input" : path): \(error)")
        }
    }
}
