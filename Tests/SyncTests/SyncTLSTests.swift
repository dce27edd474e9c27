// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
@testable import SettingsSync
import SyncProtocol
import Testing
import TestMachine

/// Sync over TLS with the server's certificate checked (`sslmode=verify-full`, `verify-ca`), against the
/// certificate authority a URL names with `sslrootcert` or the system's: a private PostgreSQL server whose
/// certificate is signed by a certificate authority made for it and names `localhost` alone.
@Suite(
    .sharingTheMachine,
    .timeLimit(.minutes(5)),
    .enabled(if: TestPostgres.unavailableReason == nil, "\(TestPostgres.unavailableReason ?? "")"))
struct SyncTLSTests {
    @Test func withTheServersAuthorityVerifyFullSyncsAWriteOverAnEncryptedConnection() async throws {
        try await withCheckedServer { postgres, start in
            let url = checkedURL(postgres, host: "localhost", mode: "verify-full", authority: true)
            let a = try await start("alpha", url)
            let b = try await start("beta", url)
            #expect(try await a.call("Set", ["/sync/tls", "<'checked'>"]).status == 0)
            #expect(try await waitForAgreement([a, b], key: "/sync/tls") == "(<'checked'>,)")
            try await waitForStatus(a, "sync-state", "<'connected'>")
            try await waitForStatus(b, "sync-state", "<'connected'>")
            let encrypted = try await postgres.psql(
                "select count(*) from pg_stat_ssl s join pg_stat_activity a using (pid) "
                    + "where s.ssl and a.usename = 'settingsbus'")
            #expect((Int(encrypted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 2, "\(encrypted.stdout)")
        }
    }

    /// Without `sslrootcert`, verify-full trusts the system's certificate authorities, which do not hold the
    /// test's: the broker says the certificate was not trusted, and serves its own writes all the same. So
    /// with the authority of another server as `sslrootcert`.
    @Test func verifyFullWithTheSystemsAuthoritiesRefusesTheServerAndLocalWritesGoOn() async throws {
        let folder = try storeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let otherAuthority = try await makeAuthority(in: folder)
        try await withCheckedServer { postgres, start in
            let machine = try await start("system", checkedURL(postgres, host: "localhost", mode: "verify-full"))
            let other = try await start(
                "other", postgres.url(host: "localhost") + "?sslmode=verify-full&sslrootcert=\(otherAuthority)")
            try await waitForStatus(machine, "sync-state", "<'error'>")
            let error = try await statusField(machine, "sync-error") ?? ""
            #expect(error.contains("certificate was not trusted"), "\(error)")
            #expect(error.contains("system's trusted certificate authorities"), "\(error)")
            #expect(try await machine.call("Set", ["/sync/local", "<1>"]).status == 0)
            #expect(try await machine.get("/sync/local") == "(<1>,)")
            try await waitForStatus(other, "sync-state", "<'error'>")
            let otherError = try await statusField(other, "sync-error") ?? ""
            #expect(otherError.contains("certificate was not trusted"), "\(otherError)")
            #expect(otherError.contains("sslrootcert \(otherAuthority)"), "\(otherError)")
            let rows = try await postgres.psql("select count(*) from settingsbus_value")
            #expect(rows.status != 0 || rows.stdout.hasPrefix("0"), "\(rows.stdout)")
        }
    }

    /// The certificate names `localhost` alone: verify-full to `127.0.0.1` is refused even with the right
    /// authority, saying the certificate does not name the host, while verify-ca (the authority checked, not
    /// the name) syncs through the same address.
    @Test func verifyFullToAHostTheCertificateDoesNotNameIsRefusedAndVerifyCAIsNot() async throws {
        try await withCheckedServer { postgres, start in
            let refused = try await start(
                "address", checkedURL(postgres, host: "127.0.0.1", mode: "verify-full", authority: true))
            let named = try await start(
                "named", checkedURL(postgres, host: "localhost", mode: "verify-full", authority: true))
            let authorityOnly = try await start(
                "authority", checkedURL(postgres, host: "127.0.0.1", mode: "verify-ca", authority: true))
            try await waitForStatus(refused, "sync-state", "<'error'>")
            let error = try await statusField(refused, "sync-error") ?? ""
            #expect(error.contains("does not name the host 127.0.0.1"), "\(error)")
            #expect(try await refused.call("Set", ["/sync/mine", "<'kept'>"]).status == 0)
            #expect(try await refused.get("/sync/mine") == "(<'kept'>,)")

            #expect(try await named.call("Set", ["/sync/both", "<2>"]).status == 0)
            #expect(try await waitForAgreement([named, authorityOnly], key: "/sync/both") == "(<2>,)")
        }
    }

    /// A URL whose `sslrootcert` cannot be used stops the broker at start with a usage error naming the file.
    @Test func aBrokerWhoseSslrootcertCannotBeReadExitsNamingIt() async throws {
        let folder = try storeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let missing = folder.appendingPathComponent("no-such-ca.pem").path
        let result = try await TestProcess.run(
            try TestBroker.executablePath(),
            ["--store", folder.appendingPathComponent("store.db").path,
             "--sync-url", "postgres://me@localhost/settings?sslmode=verify-full&sslrootcert=\(missing)",
             "--sync-dir", "/sync/", "--machine-id", "id-missing"])
        // 2: the broker's usage error, as for any other --sync-url it cannot use.
        #expect(result.status == 2, "\(result.stderr)")
        #expect(result.stderr.contains("cannot read the sslrootcert file \(missing)"), "\(result.stderr)")
    }
}

/// `DatabaseAddress` reads `sslmode` and `sslrootcert`, and names an `sslrootcert` file it cannot use.
@Suite(.sharingTheMachine, .timeLimit(.minutes(1)))
struct SyncURLTLSTests {
    @Test func anSslrootcertThatCannotBeUsedIsAnErrorNamingTheFile() throws {
        let folder = try storeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let base = "postgres://me@db.example/settings?sslmode=verify-full&sslrootcert="
        let missing = folder.appendingPathComponent("missing.pem").path
        let garbage = folder.appendingPathComponent("garbage.pem")
        try "not a certificate\n".write(to: garbage, atomically: false, encoding: .utf8)
        let broken = folder.appendingPathComponent("broken.pem")
        try "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".write(
            to: broken, atomically: false, encoding: .utf8)
        for (path, says) in [
            (missing, "cannot read the sslrootcert file \(missing)"),
            (folder.path, "cannot read the sslrootcert file \(folder.path)"),
            (garbage.path, "the sslrootcert file \(garbage.path) holds no certificate"),
        ] {
            let error = #expect(throws: SyncConfigurationError.self) { _ = try DatabaseAddress(url: base + path) }
            #expect(error?.description.contains(says) == true, "\(String(describing: error))")
        }
        // A file with a certificate's header whose certificate cannot be parsed: the broker takes the URL (it
        // parses no certificate), and the sync process says it when it reads the file to connect.
        _ = try DatabaseAddress(url: base + broken.path)
        let unparsed = #expect(throws: SyncConfigurationError.self) { _ = try SyncDatabase.trustedRoots(broken.path) }
        #expect(
            unparsed?.description.contains("the sslrootcert file \(broken.path) is not a PEM file of certificates") == true,
            "\(String(describing: unparsed))")
        let withoutTLS = #expect(throws: SyncConfigurationError.self) {
            _ = try DatabaseAddress(url: "postgres://me@db.example/settings?sslrootcert=\(garbage.path)")
        }
        #expect(withoutTLS?.description.contains("needs TLS") == true, "\(String(describing: withoutTLS))")
        #expect(throws: SyncConfigurationError.self) {
            _ = try DatabaseAddress(url: "postgres://me@db.example/settings?sslmode=verify-full&sslrootcert=")
        }
    }

    @Test func theModesAndTheAuthorityFileAreReadAndShown() async throws {
        let folder = try storeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let authority = try await makeAuthority(in: folder)
        let full = try DatabaseAddress(url: "postgres://me@db.example/s?sslmode=verify-full&sslrootcert=\(authority)")
        #expect(full.sslMode == "verify-full" && full.rootCertificateFile == authority)
        #expect(full.description == "postgres://me@db.example:5432/s?sslmode=verify-full&sslrootcert=\(authority)")
        // As with libpq, require with an authority file checks the certificate against it.
        let required = try DatabaseAddress(url: "postgres://me@db.example/s?sslmode=require&sslrootcert=\(authority)")
        #expect(required.sslMode == "verify-ca")
        let onlyAuthority = try DatabaseAddress(url: "postgres://me@db.example/s?sslmode=verify-ca")
        #expect(onlyAuthority.sslMode == "verify-ca" && onlyAuthority.rootCertificateFile == nil)
        let socket = try DatabaseAddress(url: "postgres://me@/s?host=/run/postgresql&sslmode=require")
        #expect(socket.description == "postgres://me@/s?host=/run/postgresql&sslmode=require")
        #expect(throws: SyncConfigurationError.self) {
            _ = try DatabaseAddress(url: "postgres://me@db.example/s?sslmode=verify-everything")
        }
    }
}

/// Makes a certificate authority of its own in `folder` with `openssl` and returns the path of its PEM file.
func makeAuthority(in folder: URL) async throws -> String {
    let authority = folder.appendingPathComponent("other-ca.pem").path
    let made = try await TestProcess.run(
        "/usr/bin/openssl",
        ["req", "-x509", "-new", "-days", "1", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-subj", "/CN=another test authority", "-keyout", folder.appendingPathComponent("other-ca.key").path,
         "-out", authority],
        timeLimit: .seconds(30))
    guard made.status == 0 else { throw SyncTestFailure(description: "openssl failed: \(made.stderr)") }
    return authority
}

/// The URL of `postgres` at `host` with `sslmode=mode`, and the server's certificate authority as
/// `sslrootcert` when `authority` is true.
func checkedURL(_ postgres: TestPostgres, host: String, mode: String, authority: Bool = false) -> String {
    postgres.url(host: host) + "?sslmode=\(mode)"
        + (authority ? "&sslrootcert=\(postgres.certificateAuthorityFile?.path ?? "")" : "")
}

/// Starts a private PostgreSQL server whose certificate a private authority signed for `localhost` alone,
/// runs `body` with it and a function that starts a machine syncing `/sync/` through a URL, and stops them all.
func withCheckedServer(
    _ body: (TestPostgres, _ start: (String, String) async throws -> Machine) async throws -> Void
) async throws {
    let postgres = try await TestPostgres.start(certificate: .signedByTestAuthority(names: ["DNS:localhost"]))
    let stores = try storeFolder()
    defer { try? FileManager.default.removeItem(at: stores) }
    var machines: [Machine] = []
    let start = { (name: String, url: String) async throws -> Machine in
        var arguments = syncArguments(postgres, name: name)
        arguments[1] = url
        let machine = try await startMachine(name, stores: stores, arguments: arguments)
        machines.append(machine)
        return machine
    }
    try await stoppingAfterwards(postgres, { machines }) { try await body(postgres, start) }
}
