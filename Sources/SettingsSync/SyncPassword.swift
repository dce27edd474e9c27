// SPDX-License-Identifier: Apache-2.0

import Foundation
import SyncProtocol

/// The database's password is read by the sync process alone: the broker never holds it.
extension SyncConfiguration {
    /// The password: the first line of ``passwordFile``, else the matching line of `PGPASSFILE` (or
    /// `~/.pgpass`); nil when there is none.
    ///
    /// - Throws: ``SyncConfigurationError`` when the password file cannot be read.
    func password(environment: [String: String]) throws(SyncConfigurationError) -> String? {
        if let passwordFile {
            guard let data = FileManager.default.contents(atPath: passwordFile) else {
                throw SyncConfigurationError("cannot read the password file \(passwordFile)")
            }
            let text = String(decoding: data, as: UTF8.self)
            return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        }
        let file = environment["PGPASSFILE"] ?? environment["HOME"].map { $0 + "/.pgpass" }
        guard let file, let data = FileManager.default.contents(atPath: file) else { return nil }
        return Self.pgpassPassword(String(decoding: data, as: UTF8.self), for: database)
    }

    /// The password of the first line of a `.pgpass` file (`host:port:database:user:password`, `*` matching
    /// anything, `\:` and `\\` escaped) that matches the address.
    static func pgpassPassword(_ text: String, for address: DatabaseAddress) -> String? {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            var fields: [String] = [""]
            var escaped = false
            for character in line {
                if escaped {
                    fields[fields.count - 1].append(character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == ":" && fields.count < 5 {
                    fields.append("")
                } else {
                    fields[fields.count - 1].append(character)
                }
            }
            guard fields.count == 5 else { continue }
            let wanted = [address.host ?? "localhost", "\(address.port)", address.database, address.user]
            if zip(fields.prefix(4), wanted).allSatisfy({ $0 == "*" || $0 == $1 }) { return fields[4] }
        }
        return nil
    }
}
