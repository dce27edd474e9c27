// SPDX-License-Identifier: Apache-2.0

import Glibc
import SettingsBroker
import Testing

/// `--secret-readers`: user names and uids, resolved when the broker starts.
struct SecretReadersParsingTests {
    @Test func rootAndTheBrokersUserAlwaysRead() {
        let readers = SecretReaders()
        #expect(readers.allows(0))
        #expect(readers.allows(getuid()))
        #expect(!readers.allows(65534) || getuid() == 65534)
    }

    @Test func namesAndUidsAreResolved() throws {
        let readers = try SecretReaders(resolving: "daemon, 1001,nobody")
        #expect(readers.users == [0, getuid(), 1, 1001, 65534])
        #expect(readers.allows(1001))
        #expect(!readers.allows(1002))
    }

    @Test(arguments: [
        ("no-such-user-here", "there is no user named 'no-such-user-here'"),
        ("daemon,,1", "has an empty entry"),
        ("", "has an empty entry"),
        ("4294967295", "uid 4294967295 is out of range"),
        ("99999999999", "uid 99999999999 is out of range"),
    ])
    func badListsAreRefusedWithTheReason(_ list: String, _ reason: String) {
        #expect {
            _ = try SecretReaders(resolving: list)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }
}
