// SPDX-License-Identifier: Apache-2.0

import Dispatch
import Foundation
import SettingsBusTesting

/// The settings editor on a large store (SettingsBus only).
struct EditorRun: Sendable {
    /// Registered keys in the store, each with a summary and a description.
    var keys: Int
    /// From starting `settings-editor` to its first line (the page's address): the store read and walked.
    var start = Samples()
    /// What a browser asks for to open the page: the page, its script and style, the root's listing and the
    /// listing of a directory of 100 keys (each described), one after another over HTTP.
    var pageLoad = Samples()
    /// The listing of a directory of 100 keys alone.
    var directory = Samples()
    /// From the page's address to every key's summary and description read for search.
    var indexed: Double?
    /// A search over names, summaries and descriptions: one that matches one key, and one that matches a
    /// tenth of them (the editor answers the first 500).
    var searchOne = Samples()
    var searchMany = Samples()
}

extension Bench {
    /// Starts `settings-editor` on a store of `plan.editorKeys` registered keys (from schema files, each key with
    /// a summary and a description) and times, over HTTP on 127.0.0.1, what opening its page asks for and its
    /// search. The figures are the server's: a browser adds its own rendering.
    func measureEditor() async throws {
        let keys = plan.editorKeys
        let folder = root.appendingPathComponent("editor")
        let schemas = folder.appendingPathComponent("schemas")
        try FileManager.default.createDirectory(at: schemas, withIntermediateDirectories: true)
        progress("the settings editor on \(keys) registered keys: writing their schema files")
        // Files of 1,000 keys (each well under the broker's 1 MiB a file), directories of 100 keys.
        for file in 0..<((keys + 999) / 1000) {
            var text = ""
            for index in (file * 1000)..<min(file * 1000 + 1000, keys) {
                if index % 100 == 0 { text += "[/bench/editor/g\(index / 10_000)/d\(index / 100)/]\n" }
                text += "k\(index).type=u\nk\(index).default=\(index)\n"
                text += "k\(index).summary=Summary of key \(index)\n"
                text += "k\(index).description=What key \(index) sets\(index % 10 == 0 ? ", a tenth" : "").\n"
            }
            try text.write(to: schemas.appendingPathComponent("f\(file).schema"), atomically: true, encoding: .utf8)
        }
        try await broker.stop(using: connection)
        let store = folder.appendingPathComponent("store")
        try FileManager.default.createDirectory(at: store, withIntermediateDirectories: true)
        try configureBroker(
            store: store.appendingPathComponent("settings.db"), log: folder.appendingPathComponent("broker.log"),
            arguments: ["--schema-dir", schemas.path])
        try await ping(broker.name)

        var run = EditorRun(keys: keys)
        let executable = URL(fileURLWithPath: benchExecutable).deletingLastPathComponent()
            .appendingPathComponent("settings-editor").path
        let directory = "/bench/editor/g0/d1/"
        for round in 0..<plan.editorStarts {
            let start = monotonicNanoseconds()
            let editor = try RunningProcess.start(
                executable, ["--no-browser", "--address", bus.address], environment: environment)
            guard let url = try await editor.nextLine(timeLimit: .seconds(120)),
                let components = URLComponents(string: url), let port = components.port,
                let token = components.queryItems?.first(where: { $0.name == "token" })?.value
            else {
                _ = await editor.terminate()
                throw BenchFailure("settings-editor printed no address: \(await editor.standardError())")
            }
            run.start.append(since: start)
            var client = LoopbackHTTP(port: port)
            do {
                let login = try await client.get("/login?token=\(token)")
                // The login answers with the session's cookie and a refresh to the page (not a redirect).
                guard login.status == 200, let cookie = login.header("set-cookie")?.split(separator: ";").first else {
                    throw BenchFailure("the token was not exchanged: \(login.status)")
                }
                client.cookie = String(cookie)
                if round == plan.editorStarts - 1 {
                    try await measurePage(client, directory: directory, into: &run)
                    let began = monotonicNanoseconds()
                    while true {
                        let progress = try await client.json("/api/search?q=zzz")
                        if let described = progress["described"] as? Int, let known = progress["known"] as? Int,
                            described >= known, known >= keys
                        {
                            break
                        }
                        if Double(monotonicNanoseconds() - began) > 300e9 {
                            throw BenchFailure("the editor did not describe every key within 300 s: \(progress)")
                        }
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    run.indexed = Double(monotonicNanoseconds() - began)
                    try await measureSearch(client, keys: keys, into: &run)
                }
            } catch {
                let status = await editor.terminate()
                throw BenchFailure("\(error); settings-editor exited \(status): \(await editor.standardError())")
            }
            _ = await editor.terminate()
        }
        try await broker.stop(using: connection)
        results.editor = run
    }

    private func measurePage(_ client: LoopbackHTTP, directory: String, into run: inout EditorRun) async throws {
        progress("the editor's page and a directory of 100 keys, \(plan.editorLoads) times")
        for _ in 0..<plan.editorLoads {
            let start = monotonicNanoseconds()
            for path in ["/", "/editor.js", "/editor.css", "/api/dir?path=/", "/api/dir?path=\(directory)"] {
                let response = try await client.get(path)
                guard response.status == 200 else { throw BenchFailure("GET \(path): \(response.status)") }
            }
            run.pageLoad.append(since: start)
            let listing = monotonicNanoseconds()
            let keys = try await client.json("/api/dir?path=\(directory)")["keys"] as? [Any]
            run.directory.append(since: listing)
            guard keys?.count == 100 else { throw BenchFailure("the listing of \(directory) has not its 100 keys") }
        }
    }

    private func measureSearch(_ client: LoopbackHTTP, keys: Int, into run: inout EditorRun) async throws {
        progress("searches over \(keys) keys' names, summaries and descriptions, \(plan.editorSearches) of each")
        let one = "key \(keys / 2) sets"
        for _ in 0..<plan.editorSearches {
            var start = monotonicNanoseconds()
            let found = try await client.json("/api/search?q=\(one.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")
            run.searchOne.append(since: start)
            guard found["total"] as? Int == 1 else { throw BenchFailure("the search for '\(one)' found \(found["total"] ?? "?")") }
            start = monotonicNanoseconds()
            let many = try await client.json("/api/search?q=tenth")
            run.searchMany.append(since: start)
            guard many["total"] as? Int == (keys + 9) / 10 else {
                throw BenchFailure("the search for 'tenth' found \(many["total"] ?? "?")")
            }
        }
    }
}

/// A client of HTTP/1.1 on 127.0.0.1 for the editor's measurements: one connection per request, read to its
/// end on a thread of its own (the socket calls block).
struct LoopbackHTTP: Sendable {
    let port: Int
    /// The `Cookie` header's value, once the token was exchanged.
    var cookie: String?

    struct Response {
        var status: Int
        var headers: [(String, String)]
        var body: Data

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name }?.1
        }
    }

    func json(_ path: String) async throws -> [String: Any] {
        let response = try await get(path)
        guard response.status == 200,
            let object = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        else { throw BenchFailure("GET \(path): \(response.status)") }
        return object
    }

    func get(_ path: String) async throws -> Response {
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        if let cookie { request += "Cookie: \(cookie)\r\n" }
        request += "\r\n"
        let sent = Array(request.utf8)
        let port = self.port
        let answer = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8], any Error>) in
            DispatchQueue.global().async {
                continuation.resume(with: Result { try Self.exchange(sent, port: port) })
            }
        }
        let bytes = answer
        guard let end = Self.range(of: Array("\r\n\r\n".utf8), in: bytes) else {
            throw BenchFailure("GET \(path): no header in the answer")
        }
        let head = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let status = head.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        let headers = head.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var body = Array(bytes[end.upperBound...])
        if headers.contains(where: { $0.0.lowercased() == "transfer-encoding" && $0.1 == "chunked" }) {
            body = Self.unchunk(body)
        }
        return Response(status: status, headers: headers, body: Data(body))
    }

    private static func exchange(_ request: [UInt8], port: Int) throws -> [UInt8] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchFailure("socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw BenchFailure("connect to 127.0.0.1:\(port): errno \(errno)") }
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { throw BenchFailure("write: errno \(errno)") }
            sent += count
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 { throw BenchFailure("read: errno \(errno)") }
            if count == 0 { break }
            answer += buffer[..<count]
        }
        return answer
    }

    private static func range(of needle: [UInt8], in bytes: [UInt8]) -> Range<Int>? {
        guard bytes.count >= needle.count else { return nil }
        for start in 0...(bytes.count - needle.count) where bytes[start..<(start + needle.count)].elementsEqual(needle) {
            return start..<(start + needle.count)
        }
        return nil
    }

    private static func unchunk(_ bytes: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        var index = 0
        while let line = range(of: Array("\r\n".utf8), in: Array(bytes[index...])) {
            let sizeText = String(decoding: bytes[index..<(index + line.lowerBound)], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16), size > 0 else { break }
            let start = index + line.upperBound
            guard start + size <= bytes.count else { break }
            output += bytes[start..<(start + size)]
            index = start + size + 2
            if index >= bytes.count { break }
        }
        return output
    }
}
