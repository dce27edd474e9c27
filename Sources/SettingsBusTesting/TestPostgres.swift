// SPDX-License-Identifier: Apache-2.0

public import Foundation
internal import Glibc

/// A private PostgreSQL server for tests of the broker's sync, never a server of the machine.
///
/// ``start()`` finds `initdb` (`/usr/lib/postgresql/*/bin`), makes a cluster in a temporary folder, and starts
/// `postgres` listening only on a unix socket in that folder and on a free loopback port. When the tests run
/// as root, the cluster is made and run as the unprivileged user 65534 (`setpriv`), which PostgreSQL
/// requires, and the folder is given to that user. A database `settings` and a role `settingsbus` with a
/// password are created; ``passwordFile`` holds the password for the broker. ``stop()`` ends the server by the
/// pid in `postmaster.pid` (SIGINT: fast shutdown), waits for it, and removes the folder.
///
/// ```swift
/// let postgres = try await TestPostgres.start()
/// let one = try await postgres.psql("select 1")
/// await postgres.stop()
/// ```
public final class TestPostgres: Sendable {
    /// The temporary folder: the cluster (`data`), the socket, the password file and the server's log.
    public let directory: URL
    /// The folder of the PostgreSQL binaries (`initdb`, `pg_ctl`, `postgres`).
    public let binaries: URL
    /// The loopback TCP port the server listens on.
    public let port: Int
    /// The role the broker connects as.
    public let user = "settingsbus"
    /// The role's password.
    public let password: String
    /// The database the broker syncs through.
    public let database = "settings"
    private let stopped = StopFlag()
    private let runAsNobody: Bool
    /// Whether the server takes TCP connections only over TLS (``start(tls:)``, ``start(certificate:)``).
    public let tls: Bool
    /// The server's certificate, nil without TLS.
    public let certificate: Certificate?

    /// The certificate of a server that takes TCP connections only over TLS.
    public enum Certificate: Sendable, Equatable {
        /// Self-signed, for `CN=127.0.0.1`: trusted by no one, for `sslmode=require`.
        case selfSigned
        /// Signed by a certificate authority made for this server alone (``certificateAuthorityFile``), naming
        /// the subjectAltNames given, such as `DNS:localhost` or `IP:127.0.0.1`.
        case signedByTestAuthority(names: [String])
    }

    /// Why the sync tests cannot run here, or nil when `initdb` is installed.
    public static var unavailableReason: String? {
        findBinaries() == nil
            ? "PostgreSQL's initdb is not installed (/usr/lib/postgresql/*/bin/initdb); install it with: apt-get install -y postgresql-15"
            : nil
    }

    /// The most connections the server takes (`max_connections`).
    public let maxConnections: Int

    private init(
        directory: URL, binaries: URL, port: Int, password: String, runAsNobody: Bool, certificate: Certificate?,
        maxConnections: Int
    ) {
        self.maxConnections = maxConnections
        self.directory = directory
        self.binaries = binaries
        self.port = port
        self.password = password
        self.runAsNobody = runAsNobody
        self.tls = certificate != nil
        self.certificate = certificate
    }

    /// The folder holding the cluster.
    public var dataDirectory: URL { directory.appendingPathComponent("data") }
    /// The folder of the server's unix socket.
    public var socketDirectory: URL { directory }
    /// A file holding ``password`` alone, for `--sync-password-file`.
    public var passwordFile: URL { directory.appendingPathComponent("password") }
    /// The server's log.
    public var logFile: URL { directory.appendingPathComponent("server.log") }

    /// A libpq-style URL of ``database`` as ``user`` over the loopback port, without the password.
    public var url: String { url(host: "127.0.0.1") }

    /// A libpq-style URL of ``database`` as ``user`` on ``port`` of `host` (a name or address of the loopback
    /// interface: `localhost`, `127.0.0.1`), without the password.
    public func url(host: String) -> String { "postgres://\(user)@\(host):\(port)/\(database)" }

    /// The PEM file of the certificate authority that signed the server's certificate (readable by everyone),
    /// for `sslrootcert`; nil unless the server was started with ``Certificate/signedByTestAuthority(names:)``.
    public var certificateAuthorityFile: URL? {
        guard case .signedByTestAuthority = certificate else { return nil }
        return directory.appendingPathComponent("ca.crt")
    }

    /// Finds the newest installed PostgreSQL's binaries.
    static func findBinaries() -> URL? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap(Int.init).sorted(by: >)
        for version in versions {
            let bin = URL(fileURLWithPath: "\(root)/\(version)/bin")
            if FileManager.default.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        return nil
    }

    /// Makes a cluster and starts the server; waits until it accepts connections, then creates the role and
    /// the database.
    ///
    /// - Parameter tls: with true, the server has a self-signed certificate (made with `openssl` in the folder)
    ///   and takes TCP connections only over TLS (`hostssl` in `pg_hba.conf`); a client asks for it with
    ///   `?sslmode=require`.
    /// - Parameter maxConnections: the server's `max_connections` (three of them kept for the superuser).
    /// - Throws: ``TestProcess/Failure`` when PostgreSQL is not installed (naming the package) or the server
    ///   does not come up, with its log.
    public static func start(tls: Bool = false, maxConnections: Int = 100) async throws -> TestPostgres {
        try await start(certificate: tls ? .selfSigned : nil, maxConnections: maxConnections)
    }

    /// Makes a cluster and starts the server as ``start(tls:maxConnections:)`` does, taking TCP connections
    /// only over TLS with `certificate` (none: without TLS).
    ///
    /// With ``Certificate/signedByTestAuthority(names:)``, a client that checks the certificate names
    /// ``certificateAuthorityFile`` (`?sslmode=verify-full&sslrootcert=...`) and connects to a host the
    /// certificate names.
    public static func start(certificate: Certificate?, maxConnections: Int = 100) async throws -> TestPostgres {
        // The port is free when it is picked, but the server binds it only after initdb: another server started
        // meanwhile (tests run in parallel) may have taken it. The server is then made again on another port.
        var attempt = 1
        while true {
            do {
                return try await startOnce(certificate: certificate, maxConnections: maxConnections)
            } catch let failure as TestProcess.Failure
                where attempt < 3 && failure.description.contains("Address already in use")
            {
                attempt += 1
            }
        }
    }

    private static func startOnce(certificate: Certificate?, maxConnections: Int) async throws -> TestPostgres {
        guard let binaries = findBinaries() else {
            throw TestProcess.Failure(description: unavailableReason ?? "initdb is missing")
        }
        var template = Array("/tmp/settingsbus-pg-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw TestProcess.Failure(description: "cannot create a temporary directory: errno \(errno)")
        }
        let directory = URL(fileURLWithPath: String(cString: made))
        let runAsNobody = getuid() == 0
        if runAsNobody {
            guard chown(directory.path, 65534, 65534) == 0 else {
                throw TestProcess.Failure(description: "cannot give \(directory.path) to uid 65534: errno \(errno)")
            }
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        let password = "pw-" + UUID().uuidString.lowercased()
        let port = try freeLoopbackPort()
        let server = TestPostgres(
            directory: directory, binaries: binaries, port: port, password: password, runAsNobody: runAsNobody,
            certificate: certificate, maxConnections: maxConnections)
        do {
            try await server.initialize()
            return server
        } catch {
            await server.stop()
            throw error
        }
    }

    private func initialize() async throws {
        let superuserPassword = directory.appendingPathComponent("superuser-password")
        try password.write(to: passwordFile, atomically: false, encoding: .utf8)
        try "super-\(password)".write(to: superuserPassword, atomically: false, encoding: .utf8)
        if runAsNobody {
            for file in [passwordFile, superuserPassword] { _ = chown(file.path, 65534, 65534) }
        }
        let initdb = try await runServerTool(
            "initdb",
            ["-D", dataDirectory.path, "-U", "postgres", "--auth=scram-sha-256", "--pwfile=\(superuserPassword.path)",
             "-E", "UTF8", "--locale=C", "--no-sync"])
        guard initdb.status == 0 else {
            throw TestProcess.Failure(description: "initdb failed: \(initdb.stdout)\(initdb.stderr)")
        }
        // Local (unix socket) connections as the superuser need no password, for psql in the tests.
        try """
        local all postgres trust
        local all all scram-sha-256
        \(tls ? "hostssl" : "host") all all 127.0.0.1/32 scram-sha-256

        """.write(to: dataDirectory.appendingPathComponent("pg_hba.conf"), atomically: false, encoding: .utf8)
        switch certificate {
        case .selfSigned: try await makeSelfSignedCertificate()
        case .signedByTestAuthority(let names): try await makeCertificateSignedByTestAuthority(names: names)
        case nil: break
        }
        let started = try await runServerTool(
            "pg_ctl", ["-D", dataDirectory.path, "-l", logFile.path, "-o", serverOptions, "-w", "-t", "60", "start"])
        guard started.status == 0 else {
            throw TestProcess.Failure(
                description: "pg_ctl start failed: \(started.stdout)\(started.stderr)\n\(serverLog())")
        }
        // Two calls: CREATE DATABASE cannot run in the transaction psql makes of one -c with two statements.
        for statement in ["create role \(user) login password '\(password)'", "create database \(database) owner \(user)"] {
            let made = try await psql(statement, database: "postgres")
            guard made.status == 0 else {
                throw TestProcess.Failure(description: "cannot create the role and database: \(made.stderr)")
            }
        }
    }

    /// The options `pg_ctl` starts the server with.
    private var serverOptions: String {
        var options = "-c listen_addresses=127.0.0.1 -p \(port) -k \(socketDirectory.path) -c fsync=off "
            + "-c max_connections=\(maxConnections) -c shared_buffers=16MB"
        if tls {
            options += " -c ssl=on -c ssl_cert_file=\(certificateFile.path) -c ssl_key_file=\(certificateKey.path)"
        }
        return options
    }

    private var certificateFile: URL { directory.appendingPathComponent("server.crt") }
    private var certificateKey: URL { directory.appendingPathComponent("server.key") }

    /// A self-signed certificate for 127.0.0.1, its key readable by the server's user alone.
    private func makeSelfSignedCertificate() async throws {
        try await openssl(
            ["req", "-new", "-x509", "-days", "2", "-nodes", "-newkey", "rsa:2048", "-subj", "/CN=127.0.0.1",
             "-keyout", certificateKey.path, "-out", certificateFile.path])
        giveToServer()
    }

    /// A certificate authority of this folder (`ca.crt`, readable by everyone; its key `ca.key`, by root alone)
    /// and a certificate of the server it signs, naming `names` as subjectAltNames and nothing else (the
    /// common name `SettingsBus test server` is no host name).
    private func makeCertificateSignedByTestAuthority(names: [String]) async throws {
        let authority = directory.appendingPathComponent("ca.crt")
        let authorityKey = directory.appendingPathComponent("ca.key")
        let request = directory.appendingPathComponent("server.csr")
        let extensions = directory.appendingPathComponent("server.ext")
        let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try await openssl(
            ["req", "-x509", "-new", "-days", "2"] + key
                + ["-subj", "/CN=SettingsBus test authority", "-addext", "basicConstraints=critical,CA:TRUE",
                   "-addext", "keyUsage=critical,keyCertSign,cRLSign", "-keyout", authorityKey.path,
                   "-out", authority.path])
        try await openssl(
            ["req", "-new"] + key
                + ["-subj", "/CN=SettingsBus test server", "-keyout", certificateKey.path, "-out", request.path])
        try """
        subjectAltName=\(names.joined(separator: ","))
        basicConstraints=critical,CA:FALSE
        keyUsage=critical,digitalSignature,keyEncipherment
        extendedKeyUsage=serverAuth

        """.write(to: extensions, atomically: false, encoding: .utf8)
        let serial = "0x" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16)
        try await openssl(
            ["x509", "-req", "-in", request.path, "-CA", authority.path, "-CAkey", authorityKey.path,
             "-set_serial", serial, "-days", "2", "-extfile", extensions.path, "-out", certificateFile.path])
        _ = chmod(authorityKey.path, 0o600)
        _ = chmod(authority.path, 0o644)
        giveToServer()
    }

    /// Runs `openssl` with `arguments`.
    private func openssl(_ arguments: [String]) async throws {
        let made = try await TestProcess.run("/usr/bin/openssl", arguments, timeLimit: .seconds(60))
        guard made.status == 0 else { throw TestProcess.Failure(description: "openssl failed: \(made.stderr)") }
    }

    /// Gives the server's certificate and key to the server's user, the key readable by it alone.
    private func giveToServer() {
        for file in [certificateFile, certificateKey] {
            if runAsNobody { _ = chown(file.path, 65534, 65534) }
            _ = chmod(file.path, file == certificateKey ? 0o600 : 0o644)
        }
    }

    /// Runs a program of ``binaries`` (as uid 65534 when root).
    private func runServerTool(_ name: String, _ arguments: [String]) async throws -> TestProcess.Result {
        let program = binaries.appendingPathComponent(name).path
        if runAsNobody {
            return try await TestProcess.run(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", program] + arguments,
                environment: ["HOME": directory.path], timeLimit: .seconds(120))
        }
        return try await TestProcess.run(program, arguments, timeLimit: .seconds(120))
    }

    /// Runs `psql` over the unix socket as the superuser `postgres` (trusted locally), with `-At` output
    /// (unaligned, tuples only) and `ON_ERROR_STOP`.
    ///
    /// - Parameters:
    ///   - sql: the statements.
    ///   - database: the database, ``database`` by default.
    public func psql(_ sql: String, database: String? = nil) async throws -> TestProcess.Result {
        let program = binaries.appendingPathComponent("psql").path
        let path = FileManager.default.isExecutableFile(atPath: program) ? program : "/usr/bin/psql"
        return try await TestProcess.run(
            path,
            ["-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", socketDirectory.path, "-p", "\(port)", "-U", "postgres",
             "-d", database ?? self.database, "-c", sql],
            environment: ["PGCONNECT_TIMEOUT": "10"], timeLimit: .seconds(120))
    }

    /// The server's pid, read from `postmaster.pid`.
    public var serverPid: Int32? {
        guard let text = try? String(contentsOf: dataDirectory.appendingPathComponent("postmaster.pid"), encoding: .utf8),
              let first = text.split(separator: "\n").first
        else { return nil }
        return Int32(first.trimmingCharacters(in: .whitespaces))
    }

    /// Stops the server (fast shutdown) and keeps the cluster, so ``restart()`` can start it again.
    public func pause() async throws {
        let result = try await runServerTool("pg_ctl", ["-D", dataDirectory.path, "-m", "fast", "-w", "stop"])
        guard result.status == 0 else {
            throw TestProcess.Failure(description: "pg_ctl stop failed: \(result.stdout)\(result.stderr)")
        }
    }

    /// Starts the server of ``pause()`` again on the same port and socket.
    public func resume() async throws {
        let started = try await runServerTool(
            "pg_ctl", ["-D", dataDirectory.path, "-l", logFile.path, "-o", serverOptions, "-w", "-t", "60", "start"])
        guard started.status == 0 else {
            throw TestProcess.Failure(description: "pg_ctl start failed: \(started.stderr)\n\(serverLog())")
        }
    }

    /// The server's log so far.
    public func serverLog() -> String {
        (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
    }

    /// Ends the server by its pid (SIGINT, fast shutdown), waits until the pid is gone, and removes the folder.
    public func stop() async {
        guard stopped.set() else { return }
        if let pid = serverPid {
            kill(pid, SIGINT)
            let deadline = ContinuousClock.now + .seconds(30)
            while kill(pid, 0) == 0 && ContinuousClock.now < deadline {
                // The postmaster is not our child (pg_ctl started it), so there is no exit to await: look again.
                try? await Task.sleep(for: .milliseconds(20))
            }
            if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit {
        if stopped.set() {
            if let pid = serverPid { kill(pid, SIGQUIT) }
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// A loopback port no one listens on now, below the kernel's range of ephemeral ports (so that no outgoing
    /// connection, of a broker to another test's server, takes it before the server binds it): a random one that
    /// binds, tried up to 200 times.
    static func freeLoopbackPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestProcess.Failure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        // /proc/sys/net/ipv4/ip_local_port_range: "32768\t60999" on Debian.
        let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let ephemeralStart = range.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
        let candidates = 10_000..<max(10_001, min(ephemeralStart, 65_536))
        for _ in 0..<200 {
            let port = Int.random(in: candidates)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            if bound == 0 { return port }
        }
        throw TestProcess.Failure(description: "no free loopback port below \(ephemeralStart) in 200 tries")
    }
}
