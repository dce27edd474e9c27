// SPDX-License-Identifier: Apache-2.0

import Glibc

/// The Unix users the broker gives the values of secret keys to: root, the broker's own user, and the users
/// its configuration names (`settings-broker --secret-readers`).
///
/// Any other caller gets `AccessDenied` from `Get` and `GetMany` of a secret key, and `ReadTree` leaves secret
/// keys out of its answer. On the session bus every caller normally has the broker's user, so every caller
/// may read secrets there.
///
/// ```swift
/// let readers = try SecretReaders(resolving: "gdm,1001")   // a user name and a uid
/// readers.allows(0)      // true: root
/// readers.allows(65534)  // false, unless the broker runs as nobody
/// ```
public struct SecretReaders: Sendable, Hashable {
    /// Every user allowed: root, the broker's own user, and the named ones.
    public let users: Set<UInt32>

    /// Allows root, the broker's own user and `others`.
    public init(_ others: some Sequence<UInt32> = []) {
        users = Set(others).union([0, getuid()])
    }

    /// Why a list of readers could not be resolved.
    public struct ResolutionError: Error, CustomStringConvertible, Sendable {
        /// What is wrong, for people.
        public var description: String
    }

    /// Allows root, the broker's own user and the users of a comma-separated list of user names and numeric
    /// uids, such as `gdm,1001`; each name is looked up in the password database now.
    ///
    /// - Throws: ``ResolutionError`` naming an empty entry, a uid out of range or a name no user has.
    public init(resolving list: String) throws(ResolutionError) {
        var uids: [UInt32] = []
        for entry in list.split(separator: ",", omittingEmptySubsequences: false) {
            let name = entry.trimmingSpaces
            guard !name.isEmpty else {
                throw ResolutionError(
                    description: "--secret-readers '\(list)' has an empty entry; give user names or uids separated by "
                        + "commas")
            }
            if name.allSatisfy(\.isASCIIDigit) {
                guard let uid = UInt32(name), uid != UInt32.max else {
                    throw ResolutionError(description: "--secret-readers: uid \(name) is out of range")
                }
                uids.append(uid)
            } else {
                guard let uid = Self.uid(ofUser: name) else {
                    throw ResolutionError(
                        description: "--secret-readers: there is no user named '\(name)' on this system "
                            + "(looked up in the password database); give an existing user name or a numeric uid")
                }
                uids.append(uid)
            }
        }
        self.init(uids)
    }

    /// Whether `uid` may read secret values.
    public func allows(_ uid: UInt32) -> Bool {
        users.contains(uid)
    }

    /// The uid of a user name, from the password database (`getpwnam_r`); nil when no user has it.
    static func uid(ofUser name: String) -> UInt32? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 1024)
        while true {
            let status = getpwnam_r(name, &entry, &buffer, buffer.count, &found)
            if status == ERANGE, buffer.count < 1 << 20 {
                buffer = [CChar](repeating: 0, count: buffer.count * 4)
                continue
            }
            guard status == 0, found != nil else { return nil }
            return entry.pw_uid
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isWholeNumber }
}

extension Substring {
    /// The text without leading and trailing spaces.
    fileprivate var trimmingSpaces: String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
