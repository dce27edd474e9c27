// SPDX-License-Identifier: Apache-2.0

import DBus
import SettingsModel

/// The keyfile format that `dconf dump` prints and `dconf load` reads.
///
/// ```
/// [/]
/// top-level-key=1
///
/// [editor]
/// font-size=12
/// theme='dark'
///
/// [editor/recent]
/// files=['a.txt', 'b.txt']
/// ```
///
/// Groups are directories relative to the directory dumped (`[/]` is that directory itself); each line is
/// `name=value` with the value in GVariant text with type annotations. The order is dconf's: a directory's
/// own keys first, then its subdirectories, names sorted by their bytes (a subdirectory's name with its
/// trailing `/`); empty groups are left out and groups are separated by a blank line.
enum DconfKeyfile {
    /// Prints the values under `directory` as `dconf dump` does; values outside it are ignored.
    static func format(_ values: [SettingPath: DBusValue], under directory: SettingDirectory) -> String {
        let root = Node()
        for (key, value) in values where directory.contains(key) {
            let relative = key.rawValue.dropFirst(directory.rawValue.count).split(separator: "/").map(String.init)
            var node = root
            for segment in relative.dropLast() {
                node = node.child(segment)
            }
            node.keys[relative.last ?? ""] = value
        }
        var groups: [String] = []
        root.emit(path: "", into: &groups)
        return groups.joined(separator: "\n")
    }

    /// Reads a keyfile as `dconf load` does (``SettingsModel/Keyfile/parse(_:under:)``).
    ///
    /// - Returns: the values in the order they were first given.
    /// - Throws: ``CtlError`` with status ``ExitStatus/invalid``, naming the line and what is wrong.
    static func parse(_ text: String, under directory: SettingDirectory) throws(CtlError) -> [(SettingPath, DBusValue)]
    {
        do throws(Keyfile.Problem) {
            return try Keyfile.parse(text, under: directory).map { ($0.key, $0.value) }
        } catch {
            throw CtlError(.invalid, error.description)
        }
    }

    /// One directory of the tree being printed.
    private final class Node {
        var keys: [String: DBusValue] = [:]
        var children: [String: Node] = [:]

        func child(_ name: String) -> Node {
            if let existing = children[name] { return existing }
            let made = Node()
            children[name] = made
            return made
        }

        /// Appends this directory's group, then its subdirectories' groups, in dconf's order.
        func emit(path: String, into groups: inout [String]) {
            if !keys.isEmpty {
                var lines = ["[\(path.isEmpty ? "/" : path)]"]
                for name in keys.keys.sorted(by: Self.byBytes) {
                    lines.append("\(name)=\(GVariantText.format(keys[name]!))")
                }
                groups.append(lines.joined(separator: "\n") + "\n")
            }
            for name in children.keys.sorted(by: { Self.byBytes($0 + "/", $1 + "/") }) {
                children[name]!.emit(path: path.isEmpty ? name : path + "/" + name, into: &groups)
            }
        }

        static func byBytes(_ lhs: String, _ rhs: String) -> Bool {
            lhs.utf8.lexicographicallyPrecedes(rhs.utf8)
        }
    }
}
