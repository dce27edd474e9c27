// SPDX-License-Identifier: Apache-2.0

import Synchronization

/// Who may use the editor: the holder of the one-time token printed when it started, and after that only the
/// browser that exchanged it for the session cookie.
///
/// - The token is good once: its exchange sets the cookie (HttpOnly, SameSite=Strict) and redirects to the
///   page; a second use is refused.
/// - Every request names the editor's own address in `Host` (`127.0.0.1:PORT` or `localhost:PORT`), so a page
///   of another site whose name was made to point at 127.0.0.1 (DNS rebinding) gets nothing.
/// - Every write carries the page's own `Origin` and the CSRF token the page was served with.
final class Access: Sendable {
    /// The one-time token, until it is used.
    private let token: Mutex<String?>
    /// The session cookie's value, once the token was exchanged.
    private let session = Mutex<String?>(nil)
    /// The token every write carries in `X-CSRF-Token`.
    let csrf: String
    /// The port the editor listens on, once it does.
    private let port = Mutex<Int?>(nil)

    init() {
        token = Mutex(Self.randomToken())
        csrf = Self.randomToken()
    }

    /// The one-time token (for the URL printed at start).
    var oneTimeToken: String? { token.withLock { $0 } }

    /// Records the port the server listens on.
    func listening(on port: Int) {
        self.port.withLock { $0 = port }
    }

    /// The port the server listens on.
    var listeningPort: Int? { port.withLock { $0 } }

    /// The cookie's name: with the port in it, because a browser sends a cookie of 127.0.0.1 to every port
    /// of it, so that two editors side by side keep their own.
    var cookieName: String { "settings-editor-\(listeningPort ?? 0)" }

    /// Whether `host` (the request's `Host`, or its authority) is the editor's own address.
    func isOwnHost(_ host: String?) -> Bool {
        guard let host, let port = listeningPort else { return false }
        return host == "127.0.0.1:\(port)" || host == "localhost:\(port)"
    }

    /// Whether `origin` is the page's own: `http://` and the host the request was sent to.
    func isOwnOrigin(_ origin: String?, host: String?) -> Bool {
        guard let origin, isOwnHost(host), let host else { return false }
        return origin == "http://\(host)"
    }

    /// Exchanges the one-time token for the session cookie's value; nil when the token is wrong or was used.
    func exchange(_ offered: String) -> String? {
        let valid = token.withLock { token -> Bool in
            guard let expected = token, Self.equalInConstantTime(expected, offered) else { return false }
            token = nil
            return true
        }
        guard valid else { return nil }
        let value = Self.randomToken()
        session.withLock { $0 = value }
        return value
    }

    /// Whether `cookie` is the session's.
    func isSession(_ cookie: String?) -> Bool {
        guard let cookie, let expected = session.withLock({ $0 }) else { return false }
        return Self.equalInConstantTime(expected, cookie)
    }

    /// Whether `offered` is the CSRF token.
    func isCSRFToken(_ offered: String?) -> Bool {
        guard let offered else { return false }
        return Self.equalInConstantTime(csrf, offered)
    }

    /// 32 random bytes, in hexadecimal.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        var text = ""
        for _ in 0..<4 {
            let word = generator.next() as UInt64
            let digits = String(word, radix: 16)
            text += String(repeating: "0", count: 16 - digits.count) + digits
        }
        return text
    }

    /// Compares two tokens in a time that does not depend on where they differ.
    static func equalInConstantTime(_ a: String, _ b: String) -> Bool {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
