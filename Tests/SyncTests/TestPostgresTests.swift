// SPDX-License-Identifier: Apache-2.0

import Foundation
import SettingsBusTesting
import Testing
import TestMachine

/// The test kit's private PostgreSQL server: it starts in a temporary folder (as an unprivileged user when the
/// tests run as root), answers `psql`, accepts the broker's role with its password over loopback, and is
/// ended by its pid.
@Suite(.sharingTheMachine, .timeLimit(.minutes(3)), .enabled(if: TestPostgres.unavailableReason == nil, "\(TestPostgres.unavailableReason ?? "")"))
struct TestPostgresTests {
    @Test func aPrivateServerAnswersPsqlAndIsEndedByItsPid() async throws {
        let postgres = try await TestPostgres.start()
        let one = try await postgres.psql("select 1")
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "1")

        // The broker's role logs in over the loopback port with its password.
        let asRole = try await TestProcess.run(
            "/usr/bin/psql",
            ["-X", "-At", "-h", "127.0.0.1", "-p", "\(postgres.port)", "-U", postgres.user, "-d", postgres.database,
             "-c", "select current_user"],
            environment: ["PGPASSWORD": postgres.password])
        #expect(asRole.status == 0, "\(asRole.stderr)")
        #expect(asRole.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == postgres.user)

        let pid = try #require(postgres.serverPid)
        #expect(kill(pid, 0) == 0)
        let directory = postgres.directory
        await postgres.stop()
        #expect(kill(pid, 0) != 0)
        #expect(!FileManager.default.fileExists(atPath: directory.path))
    }
}
