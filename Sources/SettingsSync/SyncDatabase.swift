// SPDX-License-Identifier: Apache-2.0

import DBus
import Foundation
import Logging
import PostgresNIO
import SettingsModel
import SyncProtocol

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
    /// Whether push and pull run as statements prepared once on the connection (``PushStatement``,
    /// ``PullStatement``): the server plans them once, not at each run, which is most of a small push's or
    /// pull's time on the server. Only for a listening engine, which holds its session: a polling engine may
    /// reach the database through a pooler that hands each transaction another session, where a statement
    /// prepared on one is unknown to the next.
    var prepared: Bool { configuration.pollInterval == nil }

    /// A pulled row.
    typealias Row = RemoteRow

    /// Why a row of the database is not applied here.
    struct RowRefusal: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// A place in the pull's order, (revision, key): after every row of revisions before `revision`, and after
    /// the rows of `revision` up to `key` (all of them when `key` is nil).
    struct Position: Sendable, Equatable {
        var revision: Int64
        var key: String?

        /// The first (revision, key) after the position, for a range of the index: the next revision's first
        /// key (no key is less than the empty text), or the least text after `key` in the keys' byte order
        /// (`COLLATE "C"`), `key` followed by the byte 1 (a text holds no byte 0).
        var start: (revision: Int64, key: String) {
            guard let key else { return (revision + 1, "") }
            return (revision, key + "\u{1}")
        }
    }

    /// A page of a pull: the rows that can be applied, those refused, where the page ended (nil when there was
    /// nothing after the position), and whether rows may follow it (the page was cut by its rows or bytes).
    struct Page: Sendable {
        var rows: [Row] = []
        var refused: [RefusedRow] = []
        var end: Position?
        var more = false
        /// The bytes of value text the page fetched.
        var bytes = 0

        /// The last revision the page holds every row of: its end's revision when nothing follows, and the one
        /// before when it may end inside that revision.
        var complete: Int64? { end.map { more ? $0.revision - 1 : $0.revision } }
    }

    /// The most value text a page of a pull fetches (but at least one row): a page is bounded by its bytes as
    /// well as its rows, so that one revision of large rows is read in pages too.
    static let pageBytes = 16 << 20

    /// The longest value text a pull fetches: 8 times the largest value, the bound `SetFromString` puts on a
    /// text (the GVariant text of a value is longer than its serialised form). A longer one is refused by its
    /// length, which the database gives without sending the text.
    static let longestValueText = 8 * SettingsBusNames.maximumValueSize

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
            // The pull's index, on tables made before it: made once, in a statement of its own (it waits for a
            // push under way, and holds no other lock).
            var indexed = true
            for try await (found) in try await connection.query(
                "SELECT to_regclass('settingsbus_value_revision_key') IS NOT NULL", logger: logger
            ).decode(Bool.self) { indexed = found }
            if !indexed {
                try await connection.query(
                    """
                    CREATE INDEX IF NOT EXISTS settingsbus_value_revision_key ON settingsbus_value (scope, revision, key)
                    """, logger: logger)
            }
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
                CREATE INDEX IF NOT EXISTS settingsbus_value_revision_key ON settingsbus_value (scope, revision, key)
                """, logger: logger)
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

    /// Records this machine and its name, and when it was last seen; returns the process id of this
    /// connection's server process, which the server gives as the sender of this connection's NOTIFYs.
    func registerMachine() async throws -> Int32 {
        var backend: Int32?
        for try await (pid) in try await connection.query(
            """
            INSERT INTO settingsbus_machine (machine, name, last_seen) VALUES (\(configuration.machineID), \
            \(configuration.machineName), now())
            ON CONFLICT (machine) DO UPDATE SET name = excluded.name, last_seen = excluded.last_seen
            RETURNING pg_backend_pid()
            """, logger: logger
        ).decode(Int32.self) { backend = pid }
        guard let backend else { throw SyncRefusal(description: "the sync database did not record this machine") }
        return backend
    }

    /// Pushes changes in one statement (one round trip, one transaction); returns the version each got (a
    /// clock ahead of the database's `now()` by more than the bound is clamped to `now()` + bound), whether
    /// any was clamped, and the revision of the push.
    ///
    /// The statement bumps the scope's revision first: the row's lock, held until the commit, serialises the
    /// pushes of a scope, so revisions are gapless in commit order. Values are upserted only where the pushed
    /// version is newer, or where the stored clock is one no broker would have pushed (below zero, or past the
    /// bound: a row written by hand, which every machine refuses, must not make its key unchangeable); a
    /// clamped push records the machine; the NOTIFY, which carries the scope alone, goes out at the commit.
    func push(_ changes: [SyncChange]) async throws -> (versions: [SyncVersion], clamped: Bool, revision: Int64) {
        let scope = configuration.scope
        let machine = configuration.machineID
        let bound = configuration.clockBoundMilliseconds
        var bindings = PostgresBindings()
        bindings.append(scope)
        bindings.append(bound)
        bindings.append(changes.map(\.key.rawValue))
        bindings.append(changes.map { $0.value?.type.signatureText ?? "" })
        bindings.append(changes.map { $0.value.map { GVariantText.format($0) } ?? "" })
        bindings.append(changes.map { $0.value == nil })
        // A clock of 2^63 or more (never given by a sound clock) is sent as a negative number: clamped too.
        bindings.append(changes.map { Int64(bitPattern: $0.version.clock) })
        bindings.append(changes.map(\.version.machine))
        bindings.append(machine)
        bindings.append(Self.channel)
        var newest: Int64?
        var revision: Int64 = 0
        try await run(PushStatement(bindings: bindings)) { row in
            revision = row.0
            newest = row.1
        }
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
        return (versions, clamped, revision)
    }

    /// Runs `statement`, prepared on the connection when ``prepared``, and otherwise as a statement of its own
    /// (parsed and planned at each run); calls `each` with each row as it arrives.
    func run<Statement: PostgresPreparedStatement>(
        _ statement: Statement, _ each: (Statement.Row) throws -> Void
    ) async throws {
        if prepared {
            for try await row in try await connection.execute(statement, logger: logger) { try each(row) }
        } else {
            let query = PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings())
            for try await row in try await connection.query(query, logger: logger) {
                try each(try statement.decodeRow(row))
            }
        }
    }

    /// The push (``push(_:)``): $1 the scope, $2 the clock bound in milliseconds, $3 – $8 the changes' keys,
    /// types, value texts, deletions, clocks and machines, $9 this machine, $10 the NOTIFY channel.
    struct PushStatement: PostgresPreparedStatement {
        static let name = "settingsbus_push_1"
        static let sql = """
            WITH rev AS (
                UPDATE settingsbus_scope SET revision = revision + 1 WHERE scope = $1
                RETURNING revision, ((extract(epoch FROM now()) * 1000)::bigint + $2) << 16 AS newest
            ), pushed AS (
                SELECT k, t, v, d, CASE WHEN h < 0 THEN (SELECT newest FROM rev)
                    ELSE least(h, (SELECT newest FROM rev)) END AS h, h AS asked, m
                FROM unnest($3::text[], $4::text[], $5::text[], $6::boolean[], $7::bigint[], $8::text[])
                    AS p (k, t, v, d, h, m)
            ), upserted AS (
                INSERT INTO settingsbus_value AS old (scope, key, type, value, deleted, hlc, machine, revision)
                SELECT $1, k, t, v, d, h, m, (SELECT revision FROM rev) FROM pushed
                ON CONFLICT (scope, key) DO UPDATE SET type = excluded.type, value = excluded.value,
                    deleted = excluded.deleted, hlc = excluded.hlc, machine = excluded.machine,
                    revision = excluded.revision
                WHERE (old.hlc, old.machine COLLATE "C") < (excluded.hlc, excluded.machine COLLATE "C")
                    OR old.hlc < 0 OR old.hlc > (SELECT newest FROM rev)
            ), marked AS (
                UPDATE settingsbus_machine SET clock_clamped_at = now(),
                    clamped_by = coalesce((SELECT max(asked >> 16) FROM pushed WHERE asked >= 0), 0)
                        - ((SELECT newest FROM rev) >> 16) + $2
                WHERE machine = $9 AND EXISTS (SELECT 1 FROM pushed WHERE asked <> h)
            )
            SELECT revision, newest, pg_notify($10, $1::text)::text FROM rev
            """
        typealias Row = (Int64, Int64, String)
        let bindings: PostgresBindings
        func makeBindings() -> PostgresBindings { bindings }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// The pull (``pull(after:limit:)``): $1 the scope, $2 the longest value text fetched, $3 the clock bound
    /// in milliseconds, $4 and $6 the first (revision, key) to read (``Position/start``), $5 the most rows, $7
    /// the most bytes of value text (a page has at least one row). The rows come in (revision, key) order, a
    /// range of the index on (scope, revision, key); the last column says whether the page was cut by its rows
    /// or bytes (rows may follow). A text's length is read from the row without fetching the text.
    struct PullStatement: PostgresPreparedStatement {
        static let name = "settingsbus_pull_2"
        static let sql = """
            SELECT p.key, p.type, CASE WHEN p.size <= $2 THEN p.value END, p.size, p.deleted, p.hlc, p.machine,
                p.revision, coalesce(m.name, p.machine), ((extract(epoch FROM now()) * 1000)::bigint + $3) << 16,
                p.found >= $5 OR p.found > count(*) OVER ()
            FROM (
                SELECT w.*, count(*) OVER () AS found,
                    sum(least(w.size, $2)) OVER (ORDER BY w.revision, w.key ROWS UNBOUNDED PRECEDING) AS running
                FROM (
                    SELECT v.key, v.type, v.value, octet_length(v.value)::bigint AS size, v.deleted, v.hlc,
                        v.machine, v.revision
                    FROM settingsbus_value v
                    WHERE v.scope = $1 AND (v.revision, v.key) >= ($4, $6 COLLATE "C")
                    ORDER BY v.revision, v.key LIMIT $5
                ) AS w
            ) AS p LEFT JOIN settingsbus_machine m ON m.machine = p.machine
            WHERE p.running - least(p.size, $2) < $7
            ORDER BY p.revision, p.key
            """
        typealias Row = (String, String, String?, Int64, Bool, Int64, String, Int64, String, Int64, Bool)
        let bindings: PostgresBindings
        func makeBindings() -> PostgresBindings { bindings }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    /// Whether a NOTIFY's payload is a hint for this broker's scope: a push names its scope; an empty payload
    /// is the listener's own (it has just started), and a payload in braces comes from a broker that sent
    /// rows in its hints. The payload is never read as data: anyone who can connect may NOTIFY, so a hint
    /// only makes the broker pull, and only the table's rows are applied.
    static func isHint(_ payload: String, forScope scope: String) -> Bool {
        payload.isEmpty || payload == scope || payload.hasPrefix("{")
    }

    /// A row of a pull as the database sent it, not read yet (``page(of:)`` reads it, outside the statement's
    /// time bound).
    typealias PulledRow = PullStatement.Row

    /// The rows after `position`, in (revision, key) order, at most `limit` and about ``pageBytes`` of value
    /// text (at least one row), as the database sent them: one round trip, which ``SyncEngine`` bounds in time;
    /// reading them is ``page(of:)``'s, outside that bound. The cursor can stop inside a revision: a revision
    /// of any number of rows is read in pages.
    ///
    /// A value text longer than ``longestValueText`` is not fetched: the database sends its length alone.
    func pull(after position: Position, limit: Int) async throws -> [PulledRow] {
        var bindings = PostgresBindings()
        bindings.append(configuration.scope)
        bindings.append(Int64(Self.longestValueText))
        bindings.append(configuration.clockBoundMilliseconds)
        let start = position.start
        bindings.append(start.revision)
        bindings.append(Int64(max(1, limit)))
        bindings.append(start.key)
        bindings.append(Int64(Self.pageBytes))
        var rows: [PulledRow] = []
        try await run(PullStatement(bindings: bindings)) { rows.append($0) }
        return rows
    }

    /// Reads the rows of a pull, with those that cannot be applied here set apart (a key, type or value this
    /// broker cannot read, a value text too long, a clock out of bounds).
    static func page(of pulled: [PulledRow]) -> Page {
        var page = Page()
        for row in pulled {
            let (key, type, value, size, deleted, hlc, machine, revision, name, newest, more) = row
            page.end = Position(revision: revision, key: key)
            page.more = page.more || more
            page.bytes += value?.utf8.count ?? 0
            do throws(RowRefusal) {
                page.rows.append(
                    try Row(
                        key: key, type: type, value: value, size: Int(size), deleted: deleted, hlc: hlc,
                        newest: newest, machine: machine, revision: revision, machineName: name))
            } catch {
                page.refused.append(RefusedRow(key: key, machineName: name, reason: error.description))
            }
        }
        return page
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

    /// LISTENs for hints and calls `hint` with each payload, until the connection closes or the task is
    /// cancelled. A NOTIFY sent by the server process `ownBackend` (the engine's own connection, by
    /// ``registerMachine()``) is left out: it is the engine's own push, whose rows the pull after the push has
    /// read. The server names the sender of each NOTIFY, which no client can forge.
    func listen(ignoring ownBackend: Int32, _ hint: @escaping @Sendable (String) -> Void) async throws {
        let listening = connection.addListener(channel: Self.channel) { _, notification in
            guard notification.backendPID != ownBackend else { return }
            hint(notification.payload)
        }
        defer { listening.stop() }
        // The connection sends the LISTEN before this statement: once it is answered, listening has started. A
        // push that notified before it was missed, so the loop pulls once more.
        try await connection.query("SELECT 1", logger: logger)
        hint("")
        try await withTaskCancellationHandler {
            try await connection.closeFuture.get()
        } onCancel: { [connection] in
            _ = connection.close() as EventLoopFuture<Void>
        }
    }
}

extension RemoteRow {
    /// A row as the database stores it: the key, the value's signature and GVariant text (unread for a
    /// tombstone; nil when the database left out a text longer than ``SyncDatabase/longestValueText``, whose length is
    /// `size`), the clock and machine of its version.
    ///
    /// The database is not trusted: a clock below zero or past `newest` (the database's `now()` plus the
    /// clock bound, the bound a push clamps to) is refused, and so is a text too long before it is read.
    ///
    /// - Throws: ``SyncDatabase/RowRefusal`` saying why the row cannot be applied here.
    init(
        key: String, type: String, value: String?, size: Int, deleted: Bool, hlc: Int64, newest: Int64,
        machine: String, revision: Int64, machineName: String
    ) throws(SyncDatabase.RowRefusal) {
        guard hlc >= 0 else { throw SyncDatabase.RowRefusal("its clock \(hlc) is negative") }
        guard hlc <= newest else {
            throw SyncDatabase.RowRefusal(
                "its clock (\(hlc >> 16) ms) is ahead of the database's now() by more than the bound "
                    + "(\(newest >> 16) ms)")
        }
        let path: SettingPath
        do { path = try SettingPath(key) } catch { throw SyncDatabase.RowRefusal("its key is not a key: \(error.message)") }
        var parsed: DBusValue?
        if !deleted {
            guard let value, size <= SyncDatabase.longestValueText else {
                throw SyncDatabase.RowRefusal(
                    "its value's text is \(size) bytes, more than \(SyncDatabase.longestValueText) (8 times the "
                        + "largest value, \(SettingsBusNames.maximumValueSize) bytes)")
            }
            let signature: DBusType
            do { signature = try DBusType(parsing: type) } catch {
                throw SyncDatabase.RowRefusal("its type '\(type)' is not a D-Bus signature")
            }
            do { parsed = try GVariantText.parse(value, as: signature) } catch {
                throw SyncDatabase.RowRefusal("its value cannot be read as \(type): \(error)")
            }
        }
        self.init(
            change: SyncChange(key: path, value: parsed, version: SyncVersion(clock: UInt64(hlc), machine: machine)),
            revision: revision, machineName: machineName)
    }
}
