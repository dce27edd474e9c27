// SPDX-License-Identifier: Apache-2.0

import DBus
import Dispatch
import Foundation
import Hummingbird
import SettingsBus
import SettingsModel
import Synchronization

/// The editor's data requests: each reads from or writes to the broker with the user's own rights, and
/// answers JSON (the export answers its text). The broker judges every write; its refusal reaches the page
/// as its error name (`OutOfRange`, `NotWritable`, `Conflict`) and message.
struct EditorAPI: Sendable {
    let store: BusSettingsStore
    let catalog: Catalog
    /// `settingsctl`, beside the editor's executable, which writes the export.
    let settingsctl: String
    /// The bus as `settingsctl --bus` names it.
    let busArgument: String

    /// The most `Describe` calls in flight for one listing.
    static let describesInFlight = 32
    /// The most keys a search answers with (the page says how many matched in all).
    static let searchLimit = 500
    /// The largest request body the editor reads.
    static let bodyLimit = 4 << 20
    /// The most commits the history shows.
    static let historyLimit: UInt32 = 200

    /// A failure that the page shows: the broker's error name or the editor's own, and a message.
    struct Failure: Error {
        var status: HTTPResponse.Status
        var name: String
        var message: String
        var key: String?

        init(_ status: HTTPResponse.Status, _ name: String, _ message: String, key: String? = nil) {
            self.status = status
            self.name = name
            self.message = message
            self.key = key
        }

        init(_ error: SettingsError, key: String? = nil) {
            let status: HTTPResponse.Status =
                switch error.code {
                case .unknownKey: .notFound
                case .conflict: .conflict
                case .notWritable, .accessDenied: .forbidden
                case .brokerUnavailable, .timedOut, .disconnected: .badGateway
                default: .unprocessableContent
                }
            self.init(status, error.shortName, error.message, key: key)
        }

        var json: JSON {
            .object(["error": .string(name), "message": .string(message), "key": .optional(key)])
        }
    }

    // MARK: Reads

    /// `GET /api/dir?path=DIR`: the directory's subdirectories with their key counts, and its keys, each
    /// described, with its value unless the key is secret.
    func directory(_ path: String) async throws(Failure) -> JSON {
        let directory = try Self.directory(path)
        let children: [String]
        do {
            children = try await store.list(directory)
        } catch {
            throw Failure(error)
        }
        let keys = children.filter { !$0.hasSuffix("/") }.compactMap { try? directory.key(named: $0) }
        await catalog.note(listed: keys.map(\.rawValue))
        let descriptions = try await describe(keys)
        let readable = keys.filter { descriptions[$0]?.schema?.isSecret != true }
        let reply: Settings1.ValuesReply
        do {
            reply = try await store.call(Settings1.GetManyRequest(keys: readable))
        } catch {
            throw Failure(error)
        }
        let values = reply.values.dictionary
        var directories: [JSON] = []
        for name in children where name.hasSuffix("/") {
            let path = directory.rawValue + name
            directories.append(.object(["path": .string(path), "count": .integer(await catalog.count(under: path))]))
        }
        return .object([
            "path": .string(directory.rawValue),
            "serial": .integer(reply.serial),
            "count": .integer(await catalog.count(under: directory.rawValue)),
            "dirs": .array(directories),
            "keys": .array(
                keys.map { key in
                    Self.keyJSON(key, descriptions[key], value: values[key.rawValue])
                }),
        ])
    }

    /// `GET /api/key?key=KEY`: everything the broker says of one key.
    func key(_ text: String) async throws(Failure) -> JSON {
        let key = try Self.key(text)
        let description: SettingDescription
        do {
            description = try await store.describe(key)
        } catch {
            throw Failure(error, key: key.rawValue)
        }
        await catalog.note(key.rawValue, description)
        var value: DBusValue?
        var serial = description.serial ?? 0
        if description.schema?.isSecret != true {
            do {
                let reply = try await store.call(Settings1.GetManyRequest(keys: [key]))
                value = reply.values.dictionary[key.rawValue]
                serial = reply.serial
            } catch {
                throw Failure(error, key: key.rawValue)
            }
        }
        guard case .object(var fields) = Self.keyJSON(key, description, value: value) else { return .null }
        fields["serial"] = .integer(serial)
        return .object(fields)
    }

    /// `GET /api/search?q=TEXT&under=DIR&modified=1`: the keys whose name, summary or description holds each
    /// word of the query.
    func search(_ query: String, under: String, modifiedOnly: Bool) async throws(Failure) -> JSON {
        let directory = try Self.directory(under.isEmpty ? "/" : under)
        guard query.utf8.count <= 1024 else { throw Failure(.badRequest, "InvalidValue", "the search is over 1 KiB") }
        let found = await catalog.search(
            query, under: directory.rawValue, modifiedOnly: modifiedOnly, limit: Self.searchLimit)
        let progress = await catalog.progress()
        return .object([
            "total": .integer(found.total),
            "keys": .array(found.keys.map { .object(["key": .string($0.key), "summary": .optional($0.summary)]) }),
            "described": .integer(progress.described),
            "known": .integer(progress.keys),
        ])
    }

    /// `GET /api/history?path=KEY_OR_DIR`: the newest commits that changed keys there, newest first.
    func history(_ path: String) async throws(Failure) -> JSON {
        let location = try Self.location(path.isEmpty ? "/" : path)
        var commits: [Settings1.HistoryReply.Commit] = []
        var since: UInt64 = 0
        do {
            // The reply is a page of at most 1 MiB: ask again from its last serial until all are read.
            for _ in 0..<64 {
                let page = try await store.call(
                    Settings1.HistoryRequest(location: location, sinceSerial: since, limit: Self.historyLimit)
                ).commits
                guard let last = page.last else { break }
                commits += page
                if commits.count >= Int(Self.historyLimit) { break }
                since = last.serial
            }
        } catch {
            throw Failure(error)
        }
        return .object([
            "path": .string(location.rawValue),
            "commits": .array(
                commits.suffix(Int(Self.historyLimit)).reversed().map { commit in
                    .object([
                        "serial": .integer(commit.serial),
                        "time": .number(Double(commit.time) / 1000),
                        "writer": .string(commit.writer),
                        "process": .string(commit.process),
                        "pid": .integer(commit.pid),
                        "changes": .array(
                            commit.changes.map { change in
                                .object([
                                    "key": .string(change.key),
                                    "omitted": .string(change.omitted),
                                    "old": ValueText.json(change.old),
                                    "new": ValueText.json(change.new),
                                ])
                            }),
                    ])
                }),
        ])
    }

    /// `GET /api/export?dir=DIR`: the directory in `settingsctl dump`'s format, written by `settingsctl dump`
    /// itself (beside the editor), so that the two never differ.
    func export(_ path: String) async throws(Failure) -> String {
        let directory = try Self.directory(path)
        let result = await Self.run(settingsctl, ["dump", "--bus", busArgument, directory.rawValue])
        guard result.status == 0 else {
            throw Failure(
                .badGateway, "ExportFailed",
                "settingsctl dump exited with status \(result.status): "
                    + result.error.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return result.output
    }

    // MARK: Writes

    /// One set of a pending change: a key and its new value in GVariant text.
    struct PendingSet: Decodable {
        var key: String
        var text: String
    }

    /// `POST /api/apply` with `{"ifSerial": N, "sets": [{"key", "text"}], "resets": [KEY_OR_DIR]}`: every
    /// pending change as one `Apply` with `if-serial`, so that a change another process made after the page
    /// read the values makes it fail with `Conflict` instead of being overwritten.
    struct ApplyBody: Decodable {
        var ifSerial: UInt64?
        var sets: [PendingSet]
        var resets: [String]
    }

    func apply(_ body: ApplyBody) async throws(Failure) -> JSON {
        var sets: [(key: SettingPath, value: DBusValue)] = []
        for set in body.sets {
            let key = try Self.key(set.key)
            sets.append((key, try await parse(set.text, for: key)))
        }
        var resets: [SettingLocation] = []
        for reset in body.resets { resets.append(try Self.location(reset)) }
        guard !sets.isEmpty || !resets.isEmpty else {
            throw Failure(.badRequest, "InvalidValue", "nothing to apply")
        }
        do {
            let serial = try await store.call(
                Settings1.ApplyRequest(
                    sets: sets, resets: resets, options: Settings1.ApplyOptions(ifSerial: body.ifSerial))
            ).serial
            return .object(["serial": .integer(serial)])
        } catch {
            let named = (sets.map(\.key.rawValue) + resets.map(\.rawValue)).first { error.message.contains($0) }
            throw Failure(error, key: named)
        }
    }

    /// `POST /api/parse` with `{"key", "text"}`: whether the text is a value of the key's type, and the
    /// parser's message where it is not, for the editor of GVariant text.
    func parseCheck(_ body: PendingSet) async throws(Failure) -> JSON {
        let key = try Self.key(body.key)
        let value = try await parse(body.text, for: key)
        return .object(["value": ValueText.json(value)])
    }

    /// `POST /api/reveal` with `{"key"}`: a secret key's value, read when the user asks for it.
    struct KeyBody: Decodable {
        var key: String
    }

    func reveal(_ body: KeyBody) async throws(Failure) -> JSON {
        let key = try Self.key(body.key)
        do {
            let reply = try await store.call(Settings1.GetManyRequest(keys: [key]))
            return .object(["value": ValueText.json(reply.values.dictionary[key.rawValue]), "serial": .integer(reply.serial)])
        } catch {
            throw Failure(error, key: key.rawValue)
        }
    }

    /// `POST /api/undo` with `{"serial"}`: gives back the values one commit of the history changed, as one
    /// `Apply` with `if-serial` (as `settingsctl undo` does): refused with `Conflict` when a key it changed has
    /// changed since.
    struct UndoBody: Decodable {
        var serial: UInt64
    }

    func undo(_ body: UndoBody) async throws(Failure) -> JSON {
        let serial = body.serial
        guard serial > 0 else { throw Failure(.badRequest, "InvalidValue", "serials start at 1") }
        let commits = try await call(Settings1.HistoryRequest(sinceSerial: serial - 1, limit: 0)).commits
        guard let commit = commits.first, commit.serial == serial else {
            throw Failure(.notFound, "UnknownCommit", "no commit \(serial) in the broker's history")
        }
        if let change = commit.changes.first(where: { !$0.omitted.isEmpty }) {
            throw Failure(
                .unprocessableContent, "CannotUndo",
                "commit \(serial) changed \(change.key), whose values the history does not keep ("
                    + (change.omitted == "secret" ? "a secret key" : "a commit too large") + ")",
                key: change.key)
        }
        // The serial first, then each key's value: if-serial then refuses anything written after the compare.
        let current = try await call(Settings1.GetManyRequest(keys: [])).serial
        var sets: [(key: SettingPath, value: DBusValue)] = []
        var resets: [SettingLocation] = []
        for change in commit.changes {
            let key = try Self.key(change.key)
            let now = try await userValue(of: key)
            guard now == change.new else {
                throw Failure(
                    .conflict, "Conflict",
                    "\(key) changed since commit \(serial): it is \(now.map(ValueText.text) ?? "unset"), not "
                        + "\(change.new.map(ValueText.text) ?? "unset"); nothing was undone",
                    key: key.rawValue)
            }
            if let old = change.old { sets.append((key, old)) } else { resets.append(.key(key)) }
        }
        let applied = try await call(
            Settings1.ApplyRequest(sets: sets, resets: resets, options: Settings1.ApplyOptions(ifSerial: current)))
        return .object(["serial": .integer(applied.serial)])
    }

    /// A call of the contract, its failure as the page shows it.
    private func call<Request: Settings1.Request>(_ request: Request) async throws(Failure) -> Request.Reply {
        do {
            return try await store.call(request)
        } catch {
            throw Failure(error)
        }
    }

    /// A key's user value (nil for none, or for a key the broker does not know).
    private func userValue(of key: SettingPath) async throws(Failure) -> DBusValue? {
        let reply: Settings1.DescribeReply
        do {
            reply = try await store.call(Settings1.DescribeRequest(key: key))
        } catch {
            if error.code == .unknownKey { return nil }
            throw Failure(error, key: key.rawValue)
        }
        return reply.value
    }

    // MARK: Parsing, describing, paths

    /// Reads GVariant text as the key's registered type (or, for a key without a schema, its value's type;
    /// else as the text's own type).
    private func parse(_ text: String, for key: SettingPath) async throws(Failure) -> DBusValue {
        guard text.utf8.count <= 1 << 20 else {
            throw Failure(.badRequest, "TooLarge", "the value's text is over 1 MiB", key: key.rawValue)
        }
        var type: DBusType?
        do {
            type = try await store.describe(key).type
        } catch where error.code == .unknownKey {
            type = nil
        } catch {
            throw Failure(error, key: key.rawValue)
        }
        do {
            return try GVariantText.parse(text, as: type)
        } catch {
            throw Failure(
                .unprocessableContent, "InvalidValue",
                "not a value of type '\(type?.signatureText ?? "?")': \(error.message) (at byte \(error.offset))",
                key: key.rawValue)
        }
    }

    /// Describes keys, `describesInFlight` at a time; a key the broker no longer knows is left out.
    private func describe(_ keys: [SettingPath]) async throws(Failure) -> [SettingPath: SettingDescription] {
        let store = self.store
        var descriptions: [SettingPath: SettingDescription] = [:]
        var failure: SettingsError?
        // Each child answers its key's description, or the error that is not UnknownKey.
        await withTaskGroup(of: Described.self) { group in
            var pending = keys[...]
            var running = 0
            while let key = pending.popFirst() {
                group.addTask { await Described(key, in: store) }
                running += 1
                if running >= Self.describesInFlight, let described = await group.next() {
                    running -= 1
                    descriptions[described.key] = described.description
                    failure = failure ?? described.error
                }
            }
            for await described in group {
                descriptions[described.key] = described.description
                failure = failure ?? described.error
            }
        }
        if let failure { throw Failure(failure) }
        for (key, description) in descriptions { await catalog.note(key.rawValue, description) }
        return descriptions
    }

    /// What `Describe` answered for one key.
    private struct Described: Sendable {
        var key: SettingPath
        var description: SettingDescription?
        var error: SettingsError?

        init(_ key: SettingPath, in store: BusSettingsStore) async {
            self.key = key
            do {
                description = try await store.describe(key)
            } catch {
                self.error = error.code == .unknownKey ? nil : error
            }
        }
    }

    /// A key as the page shows it.
    static func keyJSON(_ key: SettingPath, _ description: SettingDescription?, value: DBusValue?) -> JSON {
        let schema = description?.schema
        let isSecret = schema?.isSecret == true
        var range: JSON = .null
        if let bounds = schema?.range {
            range = .object(["min": ValueText.json(bounds.min), "max": ValueText.json(bounds.max)])
        }
        let defaultValue = description?.administratorDefault ?? schema?.defaultValue
        let modified =
            description?.source == "user" && description?.userValue != nil && description?.userValue != schema?.defaultValue
        return .object([
            "key": .string(key.rawValue),
            "name": .string(key.name),
            "type": .optional(description?.type?.signatureText ?? value?.type.signatureText),
            "value": isSecret ? .null : ValueText.json(value),
            "secret": .bool(isSecret),
            "default": ValueText.json(defaultValue),
            "source": .optional(description?.source),
            "summary": .optional(schema?.summary),
            "description": .optional(schema?.description),
            "range": range,
            "choices": schema?.choices.map { choices in .array(choices.map { ValueText.json($0) }) } ?? .null,
            "locked": .optional(description?.lock),
            "writable": .bool(description?.isWritable ?? true),
            "registered": .bool(schema != nil),
            "modified": .bool(modified),
            "problem": .optional(description?.problem),
        ])
    }

    static func directory(_ text: String) throws(Failure) -> SettingDirectory {
        do {
            return try SettingDirectory(text)
        } catch {
            throw Failure(.badRequest, error.shortName, error.message)
        }
    }

    static func key(_ text: String) throws(Failure) -> SettingPath {
        do {
            return try SettingPath(text)
        } catch {
            throw Failure(.badRequest, error.shortName, error.message)
        }
    }

    static func location(_ text: String) throws(Failure) -> SettingLocation {
        do {
            return try SettingLocation(text)
        } catch {
            throw Failure(.badRequest, error.shortName, error.message)
        }
    }

    /// Runs a program to its end and returns its status and output, reading the output on a thread of its
    /// own (the reads block).
    static func run(_ path: String, _ arguments: [String]) async -> (status: Int32, output: String, error: String) {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: path)
                process.arguments = arguments
                let output = Pipe()
                let error = Pipe()
                process.standardOutput = output
                process.standardError = error
                process.standardInput = FileHandle.nullDevice
                do {
                    try process.run()
                } catch {
                    continuation.resume(returning: (127, "", "\(path) could not be started: \(error)"))
                    return
                }
                let errorData = Mutex<Data>(Data())
                let group = DispatchGroup()
                DispatchQueue.global().async(group: group) {
                    let data = error.fileHandleForReading.readDataToEndOfFile()
                    errorData.withLock { $0 = data }
                }
                let outputData = output.fileHandleForReading.readDataToEndOfFile()
                group.wait()
                process.waitUntilExit()
                continuation.resume(
                    returning: (
                        process.terminationStatus, String(decoding: outputData, as: UTF8.self),
                        String(decoding: errorData.withLock { $0 }, as: UTF8.self)
                    ))
            }
        }
    }
}
