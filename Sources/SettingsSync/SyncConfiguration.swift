// SPDX-License-Identifier: Apache-2.0

import Foundation
public import SettingsModel

/// How a broker syncs: the database, the machine, the directories (README, "Sync across machines").
public struct SyncConfiguration: Sendable {
    /// The database, from a libpq-style URL.
    public var database: DatabaseAddress
    /// The password file given with `--sync-password-file`, if any; else `PGPASSFILE` is read.
    public var passwordFile: String?
    /// The directories whose user values sync.
    public var directories: [SettingDirectory]
    /// This machine's id (`/etc/machine-id` unless overridden).
    public var machineID: String
    /// This machine's name, for people (origins, `settingsbus_machine.name`).
    public var machineName: String
    /// The sync scope: one per user and database (`default`).
    public var scope: String = "default"
    /// How often the broker pulls without a hint (NOTIFY may be lost).
    public var pullInterval: Duration = .seconds(30)
    /// With a value, the broker polls (`--sync-poll`): it holds no connection between syncs and listens for no
    /// hint; it syncs this often (plus up to a quarter at random, so that a fleet spreads out) and a moment
    /// after a local commit queues a change.
    public var pollInterval: Duration?
    /// How long a polling broker waits after a local commit before it connects, so that a burst of writes is
    /// one sync.
    public var pollSettle: Duration = .milliseconds(200)
    /// The longest wait between two attempts to reach the database, before its jitter (up to half of it): short,
    /// so that a machine catches up within seconds of the database coming back; an attempt is one connection.
    public var longestRetry: Duration = .seconds(5)
    /// How far ahead of the database's clock a version may be before it is clamped, in milliseconds.
    public var clockBoundMilliseconds: Int64 = 60_000
    /// Added to this machine's clock: only for tests that stand for a machine whose clock is wrong.
    public var clockOffsetMilliseconds: Int64 = 0

    /// Makes a configuration.
    public init(
        database: DatabaseAddress, passwordFile: String?, directories: [SettingDirectory], machineID: String,
        machineName: String
    ) {
        self.database = database
        self.passwordFile = passwordFile
        self.directories = directories
        self.machineID = machineID
        self.machineName = machineName
    }

    /// The machine id of `/etc/machine-id`, nil when it cannot be read.
    public static func systemMachineID() -> String? {
        guard let data = FileManager.default.contents(atPath: "/etc/machine-id") else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    /// The password: the first line of ``passwordFile``, else the matching line of `PGPASSFILE` (or
    /// `~/.pgpass`); nil when there is none.
    ///
    /// - Throws: ``SyncConfigurationError`` when the password file cannot be read.
    public func password(environment: [String: String]) throws(SyncConfigurationError) -> String? {
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

/// A configuration that cannot be used, with what to do about it.
public struct SyncConfigurationError: Error, CustomStringConvertible, Sendable {
    /// What is wrong, for people.
    public var description: String

    init(_ description: String) { self.description = description }
}

/// Where the database is: a libpq-style URL, `postgres://user@host:port/database?sslmode=require`.
///
/// The URL carries no password (the broker refuses one: it would be on the command line and in the process
/// list). `host` may also be given as the query parameter `host=/path/to/socket/folder`, a unix socket.
/// `sslmode` is `disable` (the default), `require` (TLS, the server's certificate not checked), `verify-ca`
/// (TLS, the certificate checked against the trusted roots, not the host name) or `verify-full` (TLS, the
/// certificate checked against the trusted roots and the URL's host name). The trusted roots are the system's,
/// or those of `sslrootcert=/path/to/ca.pem` (PEM certificates, read when the URL is read, so that a file
/// that cannot be used stops the broker at start); as with libpq, `require` with `sslrootcert` is `verify-ca`.
public struct DatabaseAddress: Sendable, Hashable, CustomStringConvertible {
    /// The host name or address, nil when ``socketFolder`` is set.
    public var host: String?
    /// The folder of the server's unix socket, if any.
    public var socketFolder: String?
    /// The port (5432 by default).
    public var port: Int
    /// The role.
    public var user: String
    /// The database.
    public var database: String
    /// The TLS mode: `disable`, `require`, `verify-ca` or `verify-full`.
    public var sslMode: String
    /// The PEM file of the certificate authorities trusted instead of the system's (`sslrootcert`), if any.
    public var rootCertificateFile: String?

    /// Reads a URL.
    ///
    /// - Throws: ``SyncConfigurationError`` naming what is wrong: another scheme, a password in the URL, no
    ///   user, an unknown `sslmode`, an `sslrootcert` file that cannot be read or holds no certificate, or one
    ///   given without TLS.
    public init(url: String) throws(SyncConfigurationError) {
        let schemes = ["postgres://", "postgresql://"]
        guard let scheme = schemes.first(where: { url.hasPrefix($0) }) else {
            // The URL is not echoed: what follows the scheme may hold a password, and this goes to the journal.
            throw SyncConfigurationError(
                "--sync-url must start with postgres:// or postgresql://\(Self.schemeShown(url).map { ", not \($0)" } ?? "")")
        }
        var rest = Substring(url.dropFirst(scheme.count))
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        guard let at = rest.lastIndex(of: "@") else {
            throw SyncConfigurationError("--sync-url names no user: postgres://USER@HOST/DATABASE")
        }
        let userPart = rest[..<at]
        guard !userPart.contains(":") else {
            throw SyncConfigurationError(
                "--sync-url must not carry a password (it would show in the process list): give it with "
                    + "--sync-password-file or in PGPASSFILE")
        }
        user = Self.decode(userPart)
        guard !user.isEmpty else { throw SyncConfigurationError("--sync-url names no user") }
        var hostPart = rest[rest.index(after: at)...]
        var databasePart: Substring = ""
        if let slash = hostPart.firstIndex(of: "/") {
            databasePart = hostPart[hostPart.index(after: slash)...]
            hostPart = hostPart[..<slash]
        }
        database = databasePart.isEmpty ? user : Self.decode(databasePart)
        port = 5432
        if let colon = hostPart.lastIndex(of: ":"), !hostPart.hasSuffix("]") {
            guard let number = Int(hostPart[hostPart.index(after: colon)...]), (1...65535).contains(number) else {
                // Not echoed: a password put where the port goes must not reach the journal.
                throw SyncConfigurationError(
                    "--sync-url has a bad port: after the host's ':' comes a number from 1 to 65535")
            }
            port = number
            hostPart = hostPart[..<colon]
        }
        if hostPart.hasPrefix("["), hostPart.hasSuffix("]") { hostPart = hostPart.dropFirst().dropLast() }
        host = hostPart.isEmpty ? nil : Self.decode(hostPart)
        sslMode = "disable"
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            let name = String(parts[0]), value = parts.count > 1 ? Self.decode(parts[1]) : ""
            switch name {
            case "sslmode":
                guard Self.sslModes.contains(value) else {
                    throw SyncConfigurationError(
                        "--sync-url: sslmode is disable, require, verify-ca or verify-full, not '\(value)'")
                }
                sslMode = value
            case "sslrootcert":
                guard !value.isEmpty else { throw SyncConfigurationError("--sync-url: sslrootcert names no file") }
                rootCertificateFile = value
            case "host" where value.hasPrefix("/"):
                socketFolder = value
                host = nil
            case "password":
                throw SyncConfigurationError(
                    "--sync-url must not carry a password: give it with --sync-password-file or in PGPASSFILE")
            default:
                throw SyncConfigurationError("--sync-url: unknown parameter '\(name)'")
            }
        }
        if host == nil && socketFolder == nil { host = "localhost" }
        if let rootCertificateFile {
            guard sslMode != "disable" else {
                throw SyncConfigurationError(
                    "--sync-url: sslrootcert=\(rootCertificateFile) needs TLS: add sslmode=verify-full (or verify-ca)")
            }
            // Read now, so that a file that cannot be used is said at start; the connection reads it again.
            _ = try SyncDatabase.trustedRoots(rootCertificateFile)
            if sslMode == "require" { sslMode = "verify-ca" }
        }
    }

    /// The scheme of a URL as an error may show it (`postgress://`), nil when the text before `://` is not a
    /// scheme (letters, digits, `+`, `-`, `.`) or there is none: nothing else of the URL is ever shown.
    static func schemeShown(_ url: String) -> String? {
        guard let end = url.range(of: "://"), end.lowerBound > url.startIndex else { return nil }
        let scheme = url[..<end.lowerBound]
        guard scheme.count <= 20, scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return nil }
        return "'\(scheme)://…'"
    }

    /// The values `sslmode` may take.
    static let sslModes = ["disable", "require", "verify-ca", "verify-full"]

    private static func decode(_ text: Substring) -> String {
        String(text).removingPercentEncoding ?? String(text)
    }

    /// The URL as it can be logged (it never holds a password).
    public var description: String {
        var parameters: [String] = []
        if let socketFolder { parameters.append("host=\(socketFolder)") }
        if sslMode != "disable" { parameters.append("sslmode=\(sslMode)") }
        if let rootCertificateFile { parameters.append("sslrootcert=\(rootCertificateFile)") }
        return "postgres://\(user)@\(host ?? "")\(socketFolder == nil ? ":\(port)" : "")/\(database)"
            + (parameters.isEmpty ? "" : "?" + parameters.joined(separator: "&"))
    }
}
