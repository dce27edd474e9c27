// SPDX-License-Identifier: Apache-2.0

// Design note: GNOME's GSettings schemas are schemas of the broker's too.
//
// Beside each schema folder `X/settingsbus/schemas` (the XDG data folders: `$XDG_DATA_HOME`, not for a
// machine-wide broker, then each folder of `$XDG_DATA_DIRS`), the broker reads `X/glib-2.0/schemas`: the
// GSettings schema sources (`*.gschema.xml`), the enumerations they use (`*.enums.xml`) and the vendor override
// files (`*.gschema.override`), in the same readings as its own schema files, but from just after it takes
// its bus name (callers need not wait for GNOME's many sources, whose schemas the store holds from earlier
// runs: `startGSettings()`), then 100 ms after inotify tells of a change in any of the folders. A schema folder given by name
// that is not a `settingsbus/schemas` folder has no GSettings folder beside it.
//
// Each key of a schema with a path is registered at `path + key name` with its type, default, range, choices,
// summary and description (`GSettingsSchemas` in SettingsModel says how each is read), through the write path,
// one commit per file, like a schema file's: a file whose keys are registered already, with the same schemas,
// makes no commit and no signal. So the broker refuses a value out of a GNOME key's range or choices from any
// writer (a GSettings app through the `settingsbus` GIO module, `gdbus`, a Swift app), and `Describe` shows
// GNOME's summary and description.
//
// Precedence: the broker's own schema files first (all folders), then the GSettings sources, folder by folder
// in the XDG order and each folder's files by name: a key given twice has the schema of the first. Schema ids
// and enumerations are looked up across the folders the same way; a vendor override file changes the defaults
// of its own folder's schemas.
//
// Relocatable schemas (no `path`) cannot be placed, unless a `<child>` of a schema with a path places them: their
// keys are skipped, which is logged (at debug, with their ids; the count at info), and not listed in `Status`:
// distributions ship many. A source that cannot be read or is not well formed is listed in `Status` by file and
// line and skipped whole; a key that cannot be represented (a path with characters the key grammar refuses, a
// type D-Bus has no form for, a bad default) is listed by file and line and skipped, the file's other keys
// registered. The files are read within the bounds of the schema files (`FileBounds`: 1 MiB a file, the first
// 1,000 files and 16 MiB of a folder); GNOME's largest source (`org.gnome.desktop.peripherals.gschema.xml`) is
// about 16 KiB.

import SettingsModel

extension VendorSchemas {
    /// The GSettings schema folders beside schema folders: `X/glib-2.0/schemas` for each `X/settingsbus/schemas`.
    static func gsettingsDirectories(besides directories: [String]) -> [String] {
        let suffix = "/settingsbus/schemas"
        var seen = Set<String>()
        return directories.compactMap { directory -> String? in
            guard directory.hasSuffix(suffix) else { return nil }
            return String(directory.dropLast(suffix.count)) + "/glib-2.0/schemas"
        }.filter { seen.insert($0).inserted }
    }

    /// What a reading of the GSettings folders found.
    struct GSettingsReading {
        /// Every file read, or refused.
        var files: [String] = []
        /// The problems, by file (a file skipped whole) or by the problem's text.
        var problems: Problems = [:]
        /// The schemas the sources give.
        var schemas = GSettingsSchemas(sources: [])
    }

    /// Reads and converts every GSettings schema source, enumeration and override file of the GSettings
    /// folders; problems are reported (once: not again while the next reading finds them too).
    func readGSettingsSchemas(previous: Problems) -> GSettingsReading {
        var reading = GSettingsReading()
        var sources: [GSettingsSchemas.Source] = []
        var overrides: [GSettingsSchemas.OverrideFile] = []
        for (folder, directory) in gsettingsDirectories.enumerated() {
            let contents = BoundedFile.readFolder(directory) { name in
                !name.hasPrefix(".")
                    && (name.hasSuffix(".gschema.xml") || name.hasSuffix(".enums.xml") || name.hasSuffix(".gschema.override"))
            }
            for problem in contents.problems { reading.problems[problem.file] = skip(problem, previous: previous) }
            for (file, text) in contents.files {
                reading.files.append(file)
                switch text {
                case .success(let text) where file.hasSuffix(".gschema.override"):
                    overrides.append(GSettingsSchemas.OverrideFile(file: file, folder: folder, text: text))
                case .success(let text):
                    do throws(GSettingsSchemaFile.Problem) {
                        sources.append(
                            GSettingsSchemas.Source(file: file, folder: folder, content: try GSettingsSchemaFile(parsing: text)))
                    } catch {
                        let problem = Problem(file: file, line: error.line, message: error.message + "; the file is skipped")
                        reading.problems[file] = skip(problem, previous: previous)
                    }
                case .failure(let refused):
                    reading.problems[file] = skip(refused, previous: previous)
                }
            }
        }
        reading.schemas = GSettingsSchemas(sources: sources, overrides: overrides)
        for problem in reading.schemas.problems {
            let key = problem.description
            reading.problems[key] = skip(problem, previous: previous, key: key)
        }
        return reading
    }
}
