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

    /// Reads a keyfile as `dconf load` does: every `name=value` of group `[g]` sets the key `directory + g/name`
    /// (`[/]` is `directory` itself) to the value parsed from its GVariant text, with the type that text has.
    ///
    /// Blank lines and lines starting with `#` or `;` are skipped; white space around names and values is
    /// ignored; a key given twice keeps its last value.
    ///
    /// - Returns: the values in the order they were first given.
    /// - Throws: ``CtlError`` with status ``ExitStatus/invalid``, naming the line and what is wrong.
    static func parse(_ text: String, under directory: SettingDirectory) throws(CtlError) -> [(SettingPath, DBusValue)]
    {
        var group: SettingDirectory?
        var order: [SettingPath] = []
        var values: [SettingPath: DBusValue] = [:]
        let lines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            let trimmed = Text.trimmed(rawLine)
            if trimmed.isEmpty || trimmed.hasPrefix("#") || trimmed.hasPrefix(";") {
                continue
            }
            if trimmed.hasPrefix("[") {
                guard trimmed.hasSuffix("]"), let close = trimmed.lastIndex(of: "]") else {
                    throw CtlError(.invalid, "line \(number): a group line is '[path]', not '\(trimmed)'")
                }
                let name = trimmed[trimmed.index(after: trimmed.startIndex)..<close]
                let relative = name.split(separator: "/").joined(separator: "/")
                let text = relative.isEmpty ? directory.rawValue : directory.rawValue + relative + "/"
                do {
                    group = try SettingDirectory(text)
                } catch {
                    throw CtlError(.invalid, "line \(number): group [\(name)]: \(error.message)")
                }
                continue
            }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw CtlError(.invalid, "line \(number): expected 'name=value' or '[group]', found '\(trimmed)'")
            }
            guard let group else {
                throw CtlError(.invalid, "line \(number): '\(trimmed)' comes before the first [group] line")
            }
            let name = Text.trimmed(trimmed[..<equals])
            let valueText = String(trimmed[trimmed.index(after: equals)...])
            let key: SettingPath
            do {
                key = try group.key(named: name)
            } catch {
                throw CtlError(.invalid, "line \(number): \(error.message)")
            }
            do {
                let value = try GVariantText.parse(valueText)
                if values.updateValue(value, forKey: key) == nil { order.append(key) }
            } catch {
                throw CtlError(.invalid, "line \(number): the value of \(key) is not GVariant text: \(error)")
            }
        }
        return order.map { ($0, values[$0]!) }
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
