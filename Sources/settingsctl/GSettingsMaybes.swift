// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import SettingsModel

/// The keys that the GSettings schema sources of this machine declare with a maybe type (`mT`), and their
/// values in the form dconf holds them.
///
/// The broker stores such a key as an array `aT` of no element or one (as the GIO module `settingsbus` does),
/// but GSettings apps on dconf read only a maybe: `settingsctl dump` writes these keys as `@ms 'x'` and
/// `@ms nothing`, so that `settingsctl dump / | dconf load /` gives dconf what GSettings reads there, and
/// `settingsctl load` reads that form back as the array.
enum GSettingsMaybes {
    /// The GSettings schema folders, as GSettings apps and the broker find them: each of `$GSETTINGS_SCHEMA_DIR`,
    /// then `glib-2.0/schemas` under `$XDG_DATA_HOME` (default `~/.local/share`) and under each folder of
    /// `$XDG_DATA_DIRS` (default `/usr/local/share:/usr/share`).
    static func folders(environment: [String: String]) -> [String] {
        var folders = (environment["GSETTINGS_SCHEMA_DIR"] ?? "").split(separator: ":").map(String.init)
        if let home = environment["XDG_DATA_HOME"], home.hasPrefix("/") {
            folders.append(home + "/glib-2.0/schemas")
        } else if let home = environment["HOME"], home.hasPrefix("/") {
            folders.append(home + "/.local/share/glib-2.0/schemas")
        }
        let dirs = environment["XDG_DATA_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/usr/local/share:/usr/share"
        folders += dirs.split(separator: ":").map { $0 + "/glib-2.0/schemas" }
        var seen = Set<String>()
        return folders.filter { $0.hasPrefix("/") && seen.insert($0).inserted }
    }

    /// The keys of a maybe type that the sources of `folders` place; a source that cannot be read is passed
    /// over (the broker lists it in its status).
    static func keys(in folders: [String]) -> Set<SettingPath> {
        var sources: [GSettingsSchemas.Source] = []
        for (index, folder) in folders.enumerated() {
            let contents = BoundedFile.readFolder(folder) { name in
                !name.hasPrefix(".") && (name.hasSuffix(".gschema.xml") || name.hasSuffix(".enums.xml"))
            }
            for (file, text) in contents.files {
                guard case .success(let text) = text, let content = try? GSettingsSchemaFile(parsing: text) else { continue }
                sources.append(GSettingsSchemas.Source(file: file, folder: index, content: content))
            }
        }
        return GSettingsSchemas(sources: sources).maybeKeys
    }

    /// A stored value of a maybe key in the text dconf holds: `@mT nothing`, or `@mT v` (`v` without
    /// annotations, as GLib prints it); nil for a value that is not an array of no element or one.
    static func format(_ value: DBusValue) -> String? {
        guard case .array(let element, let elements) = value, elements.count <= 1 else { return nil }
        let inner = elements.first.map { GVariantText.format($0, annotateTypes: false) } ?? "nothing"
        return "@m\(element.signatureText) \(inner)"
    }
}
