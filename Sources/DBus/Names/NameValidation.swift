// SPDX-License-Identifier: Apache-2.0

internal import CDBus

/// The grammars of D-Bus names, checked with libdbus's own validators so that nothing that passes here can
/// make libdbus abort later. The validators are pure functions of their argument and safe on any thread.
enum NameValidation {
    enum Kind: String {
        case busName = "bus name"
        case interface = "interface name"
        case member = "member name"
        case objectPath = "object path"
        case errorName = "error name"
    }

    static func check(_ text: String, as kind: Kind) throws(DBusError) {
        guard !text.utf8.contains(0) else {
            throw DBusError(.invalidArgs, "invalid \(kind.rawValue) \(quoted(text)): it contains a NUL character")
        }
        let valid = text.withCString { pointer -> Bool in
            switch kind {
            case .busName: return dbus_validate_bus_name(pointer, nil) != 0
            case .interface: return dbus_validate_interface(pointer, nil) != 0
            case .member: return dbus_validate_member(pointer, nil) != 0
            case .objectPath: return dbus_validate_path(pointer, nil) != 0
            case .errorName: return dbus_validate_error_name(pointer, nil) != 0
            }
        }
        guard valid, kind != .busName || hasUniqueNameElements(text) else {
            throw DBusError(.invalidArgs, "invalid \(kind.rawValue) \(quoted(text)): \(rule(for: kind))")
        }
    }

    /// Whether a unique name (`:1.42`) has two or more non-empty elements, as the specification requires of
    /// every bus name; libdbus's validator accepts `:`, `:1` and `:.1`. Well-known names are left to libdbus.
    static func hasUniqueNameElements(_ text: String) -> Bool {
        guard text.hasPrefix(":") else { return true }
        let elements = text.utf8.dropFirst().split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return elements.count >= 2 && elements.allSatisfy { !$0.isEmpty }
    }

    static func rule(for kind: Kind) -> String {
        switch kind {
        case .busName:
            return "a bus name is ':' plus a unique id, or two or more dot-separated elements of "
                + "[A-Za-z0-9_-] not starting with a digit, at most 255 bytes"
        case .interface, .errorName:
            return "two or more dot-separated elements of [A-Za-z0-9_], none starting with a digit, "
                + "at most 255 bytes"
        case .member:
            return "one element of [A-Za-z0-9_], not starting with a digit, at most 255 bytes"
        case .objectPath:
            return "'/' or '/'-separated non-empty elements of [A-Za-z0-9_], no trailing '/'"
        }
    }

    static func quoted(_ text: String) -> String {
        let shown = text.count > 80 ? String(text.prefix(80)) + "…" : text
        return "'\(shown.unicodeScalars.map { $0.value < 0x20 ? "\\u{\(String($0.value, radix: 16))}" : String($0) }.joined())'"
    }
}
