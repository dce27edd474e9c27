// SPDX-License-Identifier: Apache-2.0

public import SettingsModel

/// How a broker syncs: the database, the machine, the directories (docs/sync.md).
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
        guard let text = try? BoundedFile.read("/etc/machine-id", limit: 4096) else { return nil }
        let id = text.split(whereSeparator: { $0.isWhitespace }).first.map(String.init) ?? ""
        return id.isEmpty ? nil : id
    }
}

/// A configuration that cannot be used, with what to do about it.
public struct SyncConfigurationError: Error, CustomStringConvertible, Sendable {
    /// What is wrong, for people.
    public var description: String

    /// Makes an error.
    public init(_ description: String) { self.description = description }
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

    /// Makes an address of its parts, as a URL read by ``init(url:)`` has them (the sync process is given
    /// them by the broker, which read the URL).
    public init(
        host: String?, socketFolder: String?, port: Int, user: String, database: String, sslMode: String,
        rootCertificateFile: String?
    ) {
        self.host = host
        self.socketFolder = socketFolder
        self.port = port
        self.user = user
        self.database = database
        self.sslMode = sslMode
        self.rootCertificateFile = rootCertificateFile
    }

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
            // Read now, so that a file that cannot be used is said at start; the sync process parses it
            // (SyncDatabase.trustedRoots) when it connects, and says there what it cannot parse.
            try Self.checkAuthorityFile(rootCertificateFile)
            if sslMode == "require" { sslMode = "verify-ca" }
        }
    }

    /// The scheme of a URL as an error may show it (`postgress://`), nil when the text before `://` is not a
    /// scheme (letters, digits, `+`, `-`, `.`) or there is none: nothing else of the URL is ever shown.
    static func schemeShown(_ url: String) -> String? {
        guard let end = url.firstRange(of: "://"), end.lowerBound > url.startIndex else { return nil }
        let scheme = url[..<end.lowerBound]
        guard scheme.count <= 20, scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return nil }
        return "'\(scheme)://…'"
    }

    /// The values `sslmode` may take.
    static let sslModes = ["disable", "require", "verify-ca", "verify-full"]

    /// A file of certificate authorities as far as it can be checked without parsing certificates: it can
    /// be read, and holds a PEM certificate's header.
    static func checkAuthorityFile(_ file: String) throws(SyncConfigurationError) {
        let text: String
        do { text = try BoundedFile.read(file, limit: 4 << 20) } catch {
            throw SyncConfigurationError("--sync-url: cannot read the sslrootcert file \(file)")
        }
        guard text.contains("CERTIFICATE-----") else {
            throw SyncConfigurationError(
                "--sync-url: the sslrootcert file \(file) holds no certificate (-----BEGIN CERTIFICATE-----)")
        }
    }

    /// The text with its percent escapes (`%2F`) decoded; the text itself when an escape is not two hex
    /// digits or the bytes are not UTF-8.
    static func decode(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard utf8.count >= 2, let high = hexDigit(utf8[utf8.startIndex]),
                let low = hexDigit(utf8[utf8.startIndex + 1])
            else { return String(text) }
            bytes.append(high << 4 | low)
            utf8 = utf8.dropFirst(2)
        }
        return String(validating: bytes, as: UTF8.self) ?? String(text)
    }

    private static func hexDigit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
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
