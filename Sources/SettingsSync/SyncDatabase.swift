// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import Logging
import PostgresNIO
import SettingsBroker
import SettingsModel

/// One connection to the sync database and the statements of sync (decision 0028).
///
/// Tables: `settingsbus_meta(schema_version)`; `settingsbus_scope(scope, revision)`, whose row is bumped at the
/// start of every push, so that its lock serialises the pushes of a scope and revisions are gapless in commit
/// order; `settingsbus_value(scope, key, type, value, deleted, hlc, machine, revision)`, values as GVariant text
/// with their signature; `settingsbus_machine(machine, name, last_seen, clock_clamped_at, clamped_by)`.
struct SyncDatabase: Sendable {
    /// The schema this broker writes and reads; a database with a newer one is refused.
    static let schemaVersion = 1
    /// The NOTIFY channel.
    static let channel = "settingsbus"

    let connection: PostgresConnection
    let configuration: SyncConfiguration
    let logger: Logger

    /// A pulled row.
    struct Row: Sendable {
        var change: SyncChange
        var revision: Int64
        var machineName: String

        /// A row as the database stores it: the key, the value's signature and GVariant text (unread for a
        /// tombstone), the clock and machine of its version.
        ///
        /// - Throws: ``SettingsError`` or ``GVariantTextError`` for a key, type or value this broker cannot read.
        init(
            key: String, type: String, value: String, deleted: Bool, hlc: Int64, machine: String, revision: Int64,
            machineName: String
        ) throws {
            let parsed = deleted ? nil : try GVariantText.parse(value, as: try DBusType(parsing: type))
            change = SyncChange(
                key: try SettingPath(key), value: parsed,
                version: SyncVersion(clock: UInt64(bitPattern: hlc), machine: machine))
            self.revision = revision
            self.machineName = machineName
        }
    }

    /// Connects, with TLS when the URL asks for it.
    ///
    /// - Throws: ``SyncRefusal`` when the server's certificate is not trusted or does not name the URL's host
    ///   (the database is reached but cannot be used as configured), and the connection's errors otherwise.
    static func connect(
        _ configuration: SyncConfiguration, password: String?, logger: Logger
    ) async throws -> SyncDatabase {
        let address = configuration.database
        var postgres: PostgresConnection.Configuration
        if let folder = address.socketFolder {
            postgres = .init(
                unixSocketPath: "\(folder)/.s.PGSQL.\(address.port)", username: address.user, password: password,
                database: address.database)
        } else {
            // postgres-nio gives NIOSSL the host as the server's name (SNI, and the name verify-full checks)
            // unless it is an IP address, which NIOSSL then checks against the certificate's IP names.
            postgres = .init(
                host: address.host ?? "localhost", port: address.port, username: address.user, password: password,
                database: address.database, tls: try tls(address))
        }
        postgres.options.connectTimeout = .seconds(10)
        var quiet = logger
        quiet.logLevel = .critical
        do {
            let connection = try await PostgresConnection.connect(configuration: postgres, id: 1, logger: quiet)
            return SyncDatabase(connection: connection, configuration: configuration, logger: quiet)
        } catch {
            if let refusal = certificateRefusal(error, address: address) { throw refusal }
            throw error
        }
    }

    /// The TLS of a TCP connection, as the URL's `sslmode` and `sslrootcert` ask.
    ///
    /// - Throws: ``SyncRefusal`` when the `sslrootcert` file can no longer be used.
    static func tls(_ address: DatabaseAddress) throws -> PostgresConnection.Configuration.TLS {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch address.sslMode {
        case "require": configuration.certificateVerification = .none
        case "verify-ca": configuration.certificateVerification = .noHostnameVerification
        case "verify-full": configuration.certificateVerification = .fullVerification
        default: return .disable
        }
        if let file = address.rootCertificateFile, configuration.certificateVerification != .none {
            do throws(SyncConfigurationError) {
                configuration.trustRoots = .certificates(try trustedRoots(file))
            } catch {
                throw SyncRefusal(description: error.description)
            }
        }
        return .require(try NIOSSLContext(configuration: configuration))
    }

    /// The certificates of a PEM file of certificate authorities (`sslrootcert`).
    ///
    /// - Throws: ``SyncConfigurationError`` naming the file when it cannot be read, cannot be parsed or holds
    ///   no certificate.
    static func trustedRoots(_ file: String) throws(SyncConfigurationError) -> [NIOSSLCertificate] {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw SyncConfigurationError("--sync-url: cannot read the sslrootcert file \(file)")
        }
        // NIOSSL says only that it failed: a file with no PEM certificate at all is told apart first.
        guard String(decoding: data, as: UTF8.self).contains("CERTIFICATE-----") else {
            throw SyncConfigurationError(
                "--sync-url: the sslrootcert file \(file) holds no certificate (-----BEGIN CERTIFICATE-----)")
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(data))
        } catch {
            throw SyncConfigurationError(
                "--sync-url: the sslrootcert file \(file) is not a PEM file of certificates (it cannot be parsed)")
        }
        guard !certificates.isEmpty else {
            throw SyncConfigurationError("--sync-url: the sslrootcert file \(file) holds no certificate")
        }
        return certificates
    }

    /// What to say when a connection failed because the server's certificate was checked and refused; nil
    /// for any other failure.
    static func certificateRefusal(_ error: any Error, address: DatabaseAddress) -> SyncRefusal? {
        var cause: (any Error)? = error
        while let psql = cause as? PSQLError { cause = psql.underlying }
        if let extra = cause as? NIOSSLExtraError, extra == .failedToValidateHostname {
            return SyncRefusal(
                description: "the server's certificate was not trusted: it does not name the host "
                    + "\(address.host ?? "") of --sync-url (sslmode=verify-full checks the host name; connect to "
                    + "a name the certificate holds)")
        }
        if case .handshakeFailed(let reason) = cause as? NIOSSLError,
            "\(reason)".contains("CERTIFICATE_VERIFY_FAILED")
        {
            // BoringSSL's reason is not kept: most often another authority signed it, but it may have expired.
            let roots = address.rootCertificateFile.map {
                "the certificate authorities of sslrootcert \($0) (sslmode=\(address.sslMode)): is it the "
                    + "authority that signed the server's certificate?"
            } ?? "the system's trusted certificate authorities (sslmode=\(address.sslMode)): name the server's "
                + "certificate authority with sslrootcert=/path/to/ca.pem"
            return SyncRefusal(
                description: "the server's certificate was not trusted: it is not signed by, or no longer valid "
                    + "for, \(roots)")
        }
        return nil
    }

    func close() async {
        try? await connection.close()
    }

    /// Makes the tables when missing (under an advisory lock, so two brokers do not race) and checks the
    /// schema version.
    ///
    /// - Throws: ``SyncRefusal`` for a schema newer than this broker knows.
    func prepare() async throws {
        let scope = configuration.scope
        // Tables made already: only the version is checked and the scope's row made, with no DDL, whose locks
        // would deadlock with another broker's push.
        var made = false
        for try await (found) in try await connection.query(
            "SELECT to_regclass('settingsbus_machine') IS NOT NULL AND to_regclass('settingsbus_meta') IS NOT NULL",
            logger: logger
        ).decode(Bool.self) { made = found }
        var existing: Int?
        if made {
            for try await (version) in try await connection.query(
                "SELECT max(schema_version) FROM settingsbus_meta", logger: logger
            ).decode(Int?.self) { existing = version }
        }
        if let existing {
            guard existing <= Self.schemaVersion else {
                throw SyncRefusal(
                    description: "the sync database has schema version \(existing); this broker knows version "
                        + "\(Self.schemaVersion) and older: use a newer settings-broker")
            }
            try await connection.query(
                "INSERT INTO settingsbus_scope (scope, revision) VALUES (\(scope), 0) ON CONFLICT DO NOTHING",
                logger: logger)
            return
        }
        try await connection.withTransaction(logger: logger) { db in
            try await db.query("SELECT pg_advisory_xact_lock(7458301)", logger: logger)
            try await db.query(
                "CREATE TABLE IF NOT EXISTS settingsbus_meta (schema_version integer NOT NULL)", logger: logger)
            let versions = try await db.query("SELECT max(schema_version) FROM settingsbus_meta", logger: logger)
            var found: Int?
            for try await (version) in versions.decode(Int?.self) { found = version }
            if let found, found > Self.schemaVersion {
                throw SyncRefusal(
                    description: "the sync database has schema version \(found); this broker knows version "
                        + "\(Self.schemaVersion) and older: use a newer settings-broker")
            }
            if found == nil {
                try await db.query(
                    "INSERT INTO settingsbus_meta (schema_version) VALUES (\(Self.schemaVersion))", logger: logger)
            }
            try await db.query(
                """
                CREATE TABLE IF NOT EXISTS settingsbus_scope (scope text PRIMARY KEY, revision bigint NOT NULL)
                """, logger: logger)
            try await db.query(
                """
                CREATE TABLE IF NOT EXISTS settingsbus_value (
                    scope text NOT NULL, key text COLLATE "C" NOT NULL, type text NOT NULL, value text NOT NULL,
                    deleted boolean NOT NULL, hlc bigint NOT NULL, machine text COLLATE "C" NOT NULL,
                    revision bigint NOT NULL, PRIMARY KEY (scope, key))
                """, logger: logger)
            try await db.query(
                "CREATE INDEX IF NOT EXISTS settingsbus_value_revision ON settingsbus_value (scope, revision)",
                logger: logger)
            try await db.query(
                """
                CREATE TABLE IF NOT EXISTS settingsbus_machine (
                    machine text PRIMARY KEY, name text NOT NULL, last_seen timestamptz,
                    clock_clamped_at timestamptz, clamped_by bigint)
                """, logger: logger)
            try await db.query(
                "INSERT INTO settingsbus_scope (scope, revision) VALUES (\(scope), 0) ON CONFLICT DO NOTHING",
                logger: logger)
        }
    }

    /// Records this machine and its name, and when it was last seen.
    func registerMachine() async throws {
        try await connection.query(
            """
            INSERT INTO settingsbus_machine (machine, name, last_seen) VALUES (\(configuration.machineID), \
            \(configuration.machineName), now())
            ON CONFLICT (machine) DO UPDATE SET name = excluded.name, last_seen = excluded.last_seen
            """, logger: logger)
    }

    /// Pushes changes in one statement (one round trip, one transaction); returns the version each got (a
    /// clock ahead of the database's `now()` by more than the bound is clamped to `now()` + bound) and whether
    /// any was clamped.
    ///
    /// The statement bumps the scope's revision first: the row's lock, held until the commit, serialises the
    /// pushes of a scope, so revisions are gapless in commit order. Values are upserted only where the pushed
    /// version is newer; a clamped push records the machine; the NOTIFY goes out at the commit.
    func push(_ changes: [SyncChange]) async throws -> (versions: [SyncVersion], clamped: Bool) {
        let scope = configuration.scope
        let machine = configuration.machineID
        let bound = configuration.clockBoundMilliseconds
        let rows = try await connection.query(
            """
            WITH rev AS (
                UPDATE settingsbus_scope SET revision = revision + 1 WHERE scope = \(scope)
                RETURNING revision, ((extract(epoch FROM now()) * 1000)::bigint + \(bound)) << 16 AS newest
            ), pushed AS (
                SELECT k, t, v, d, least(h, (SELECT newest FROM rev)) AS h, h AS asked, m
                FROM unnest(\(changes.map(\.key.rawValue))::text[],
                    \(changes.map { $0.value?.type.signatureText ?? "" })::text[],
                    \(changes.map { $0.value.map { GVariantText.format($0) } ?? "" })::text[],
                    \(changes.map { $0.value == nil })::boolean[],
                    \(changes.map { Int64(bitPattern: $0.version.clock) })::bigint[],
                    \(changes.map(\.version.machine))::text[]) AS p (k, t, v, d, h, m)
            ), upserted AS (
                INSERT INTO settingsbus_value AS old (scope, key, type, value, deleted, hlc, machine, revision)
                SELECT \(scope), k, t, v, d, h, m, (SELECT revision FROM rev) FROM pushed
                ON CONFLICT (scope, key) DO UPDATE SET type = excluded.type, value = excluded.value,
                    deleted = excluded.deleted, hlc = excluded.hlc, machine = excluded.machine,
                    revision = excluded.revision
                WHERE (old.hlc, old.machine COLLATE "C") < (excluded.hlc, excluded.machine COLLATE "C")
                RETURNING key, type, value, deleted, hlc, machine
            ), hint AS (
                SELECT json_build_object('s', \(scope)::text, 'r', (SELECT revision FROM rev), 'n',
                    \(configuration.machineName)::text, 'k', coalesce(json_agg(json_build_array(
                        key, type, value, deleted, hlc::text, machine)), '[]'::json))::text AS text
                FROM upserted
            ), marked AS (
                UPDATE settingsbus_machine SET clock_clamped_at = now(),
                    clamped_by = (SELECT max(asked >> 16) FROM pushed) - ((SELECT newest FROM rev) >> 16) + \(bound)
                WHERE machine = \(machine) AND EXISTS (SELECT 1 FROM pushed WHERE asked > h)
            )
            SELECT revision, newest, pg_notify(\(Self.channel),
                CASE WHEN octet_length(hint.text) <= \(Self.hintLimit) THEN hint.text ELSE \(scope)::text END)::text
            FROM rev, hint
            """, logger: logger)
        var newest: Int64?
        for try await (_, limit, _) in rows.decode((Int64, Int64, String).self) { newest = limit }
        guard let newest else {
            throw SyncRefusal(description: "the sync database has no row for the scope '\(scope)'")
        }
        let limit = UInt64(max(0, newest))
        var clamped = false
        let versions = changes.map { change in
            guard change.version.clock > limit else { return change.version }
            clamped = true
            return SyncVersion(clock: limit, machine: change.version.machine)
        }
        return (versions, clamped)
    }

    /// The longest NOTIFY payload that carries a push's rows (PostgreSQL takes up to 8000 bytes); a larger
    /// push notifies with its scope alone.
    static let hintLimit = 7900

    /// A NOTIFY's payload: a push's scope, revision, machine name and the rows it stored (``Row``s of that
    /// revision, all of them), or nil for a payload that names only a scope (a push too large to carry, or
    /// another broker's).
    static func hintedRows(_ payload: String) -> (scope: String, revision: Int64, rows: [Row])? {
        guard payload.hasPrefix("{"),
            let object = try? JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any],
            let scope = object["s"] as? String, let revision = (object["r"] as? NSNumber)?.int64Value,
            let name = object["n"] as? String, let entries = object["k"] as? [[Any]]
        else { return nil }
        var rows: [Row] = []
        for entry in entries {
            guard entry.count == 6, let key = entry[0] as? String, let type = entry[1] as? String,
                let text = entry[2] as? String, let deleted = (entry[3] as? NSNumber)?.boolValue,
                let hlc = (entry[4] as? String).flatMap({ Int64($0) }), let machine = entry[5] as? String,
                let row = try? Row(
                    key: key, type: type, value: text, deleted: deleted, hlc: hlc, machine: machine,
                    revision: revision, machineName: name)
            else { return nil }
            rows.append(row)
        }
        return (scope, revision, rows)
    }

    /// The rows after `cursor`, in revision order, at most `limit` (all rows of the last revision, so that the
    /// cursor never stops inside a revision).
    func pull(after cursor: Int64, limit: Int) async throws -> [Row] {
        let scope = configuration.scope
        let rows = try await connection.query(
            """
            SELECT v.key, v.type, v.value, v.deleted, v.hlc, v.machine, v.revision, coalesce(m.name, v.machine)
            FROM settingsbus_value v LEFT JOIN settingsbus_machine m ON m.machine = v.machine
            WHERE v.scope = \(scope) AND v.revision > \(cursor)
              AND v.revision <= (SELECT coalesce(max(revision), \(cursor)) FROM (
                  SELECT revision FROM settingsbus_value WHERE scope = \(scope) AND revision > \(cursor)
                  ORDER BY revision LIMIT \(limit)) AS first)
            ORDER BY v.revision, v.key
            """, logger: logger)
        var pulled: [Row] = []
        for try await (key, type, value, deleted, hlc, machine, revision, name) in rows.decode(
            (String, String, String, Bool, Int64, String, Int64, String).self)
        {
            do {
                pulled.append(
                    try Row(
                        key: key, type: type, value: value, deleted: deleted, hlc: hlc, machine: machine,
                        revision: revision, machineName: name))
            } catch {
                logger.warning("sync: a row of the database cannot be read and is skipped", metadata: ["key": "\(key)"])
            }
        }
        return pulled
    }

    /// The names of machines whose clock was clamped, with how far ahead they were.
    func clampedMachines() async throws -> [String] {
        var names: [String] = []
        for try await (name, ahead) in try await connection.query(
            "SELECT name, coalesce(clamped_by, 0) FROM settingsbus_machine WHERE clock_clamped_at IS NOT NULL ORDER BY name",
            logger: logger
        ).decode((String, Int64).self) {
            names.append("\(name) (\(ahead / 1000) s ahead)")
        }
        return names
    }

    /// LISTENs for hints and calls `hint` with each payload, until the connection fails or the task is
    /// cancelled.
    func listen(_ hint: @escaping @Sendable (String) -> Void) async throws {
        try await connection.listen(on: Self.channel) { notifications in
            // Listening starts now: a push that notified before it was missed, so the loop pulls once more.
            hint("")
            for try await notification in notifications { hint(notification.payload) }
        }
    }
}
