// SPDX-License-Identifier: Apache-2.0

import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Checks every request before a route sees it (``Access``), and gives every answer the headers that keep
/// the page to itself: a Content-Security-Policy of `'self'` (no inline script, nothing from elsewhere), no
/// caching, no referrer, no framing.
struct AccessMiddleware: RouterMiddleware {
    typealias Context = BasicRequestContext

    let access: Access

    /// The Content-Security-Policy of every answer.
    static let contentSecurityPolicy =
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        + "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

    // @concurrent, as the protocol (compiled without NonisolatedNonsendingByDefault) declares it.
    @concurrent func handle(
        _ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        let response: Response
        do {
            response = try await check(request, context: context, next: next)
        } catch let error as any HTTPResponseError {
            // A request the router could not answer (no such page, a body too large): the error's status,
            // with the same headers, and nothing of the request in the answer.
            response = Self.refusal(error.status, "\(error.status.code) \(error.status.reasonPhrase)")
        }
        return Self.secured(response)
    }

    @concurrent private func check(
        _ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        // DNS rebinding: a page of another site, its name pointed at 127.0.0.1, sends that name as Host.
        let host = request.head.authority
        guard access.isOwnHost(host) else {
            return Self.refusal(.forbidden, "403 Forbidden: this editor answers only at its own address")
        }
        if request.uri.path == "/login" {
            guard request.method == .get, let token = request.uri.queryParameters.get("token"),
                let session = access.exchange(token)
            else {
                return Self.refusal(
                    .forbidden, "403 Forbidden: this link was used already or is not the editor's; start it again")
            }
            // The page is reached by a refresh from this answer, not a redirect: the browser may have come from
            // the file the editor handed it (file://, another site), and a redirect keeps that origin, so the
            // SameSite=Strict cookie would not be sent with it; a refresh is the editor's own page navigating.
            var headers = HTTPFields()
            headers[.contentType] = "text/html; charset=utf-8"
            headers[.setCookie] = "\(access.cookieName)=\(session); Path=/; HttpOnly; SameSite=Strict"
            headers[HTTPField.Name("Refresh")!] = "0;url=/"
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody(byteBuffer: ByteBuffer(string: Self.loggedIn)))
        }
        guard access.isSession(request.cookies[access.cookieName]?.value) else {
            return Self.refusal(
                .forbidden, "403 Forbidden: open the editor with the link that settings-editor printed")
        }
        if request.method != .get && request.method != .head {
            guard access.isOwnOrigin(request.headers[.origin], host: host),
                access.isCSRFToken(request.headers[Self.csrfHeader])
            else {
                return Self.refusal(.forbidden, "403 Forbidden: a write must come from the editor's own page")
            }
        }
        return try await next(request, context)
    }

    /// The answer to the token's exchange: it goes on to the page at once.
    static let loggedIn = """
        <!DOCTYPE html>
        <html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url=/">
        <title>Settings editor</title></head>
        <body><p>Logged in: <a href="/">open the settings editor</a>.</p></body></html>

        """

    /// The header each write carries the CSRF token in.
    static let csrfHeader = HTTPField.Name("X-CSRF-Token")!

    /// A refusal: plain text that names nothing of the store.
    static func refusal(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; charset=utf-8"
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text + "\n")))
    }

    static func secured(_ response: Response) -> Response {
        var response = response
        response.headers[HTTPField.Name("Content-Security-Policy")!] = contentSecurityPolicy
        response.headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }
}

/// The editor's routes: the page and its two files, and the data requests of ``EditorAPI``.
enum EditorRoutes {
    static func router(api: EditorAPI, access: Access, startDirectory: String) -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: AccessMiddleware(access: access))
        router.get("/") { _, _ in
            page(Page.html(csrf: access.csrf, directory: startDirectory), type: "text/html; charset=utf-8")
        }
        router.get("/editor.js") { _, _ in page(Page.script, type: "text/javascript; charset=utf-8") }
        router.get("/editor.css") { _, _ in page(Page.style, type: "text/css; charset=utf-8") }
        router.get("/api/dir") { request, _ in
            await answer { try await api.directory(query(request, "path") ?? "/") }
        }
        router.get("/api/key") { request, _ in
            await answer { try await api.key(query(request, "key") ?? "") }
        }
        router.get("/api/search") { request, _ in
            await answer {
                try await api.search(
                    query(request, "q") ?? "", under: query(request, "under") ?? "/",
                    modifiedOnly: query(request, "modified") == "1")
            }
        }
        router.get("/api/history") { request, _ in
            await answer { try await api.history(query(request, "path") ?? "/") }
        }
        router.get("/api/export") { request, _ in
            do {
                let text = try await api.export(query(request, "dir") ?? "/")
                return page(text, type: "text/plain; charset=utf-8")
            } catch let failure as EditorAPI.Failure {
                return json(failure.json, status: failure.status)
            }
        }
        router.get("/api/events") { _, _ in
            events(api.catalog)
        }
        router.post("/api/apply") { request, context in
            await answer {
                try await api.apply(try await body(request, context, as: EditorAPI.ApplyBody.self))
            }
        }
        router.post("/api/parse") { request, context in
            await answer {
                try await api.parseCheck(try await body(request, context, as: EditorAPI.PendingSet.self))
            }
        }
        router.post("/api/reveal") { request, context in
            await answer {
                try await api.reveal(try await body(request, context, as: EditorAPI.KeyBody.self))
            }
        }
        router.post("/api/undo") { request, context in
            await answer {
                try await api.undo(try await body(request, context, as: EditorAPI.UndoBody.self))
            }
        }
        return router
    }

    /// A query parameter, percent-decoded.
    static func query(_ request: Request, _ name: String) -> String? {
        request.uri.queryParameters.get(name)
    }

    /// Decodes a JSON body of at most ``EditorAPI/bodyLimit`` bytes.
    static func body<T: Decodable>(
        _ request: Request, _ context: BasicRequestContext, as type: T.Type
    ) async throws(EditorAPI.Failure) -> T {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: EditorAPI.bodyLimit)
        } catch {
            throw EditorAPI.Failure(.contentTooLarge, "TooLarge", "the request is over 4 MiB")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
        } catch {
            throw EditorAPI.Failure(.badRequest, "InvalidRequest", "the request is not the JSON expected")
        }
    }

    /// Runs a data request and answers its JSON, or its failure.
    static func answer(_ body: () async throws -> JSON) async -> Response {
        do {
            return json(try await body())
        } catch let failure as EditorAPI.Failure {
            return json(failure.json, status: failure.status)
        } catch {
            return json(EditorAPI.Failure(.internalServerError, "Failed", "\(error)").json, status: .internalServerError)
        }
    }

    static func json(_ value: JSON, status: HTTPResponse.Status = .ok) -> Response {
        page(value.text, type: "application/json", status: status)
    }

    static func page(_ text: String, type: String, status: HTTPResponse.Status = .ok) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = type
        return Response(status: status, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// `GET /api/events`: the changes of the store as server-sent events, one `data:` line of JSON per commit,
    /// for as long as the page keeps the stream open.
    static func events(_ catalog: Catalog) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                let (id, stream) = await catalog.subscribe()
                do {
                    try await writer.write(ByteBuffer(string: ": open\nretry: 1000\n\n"))
                    for await change in stream {
                        try await writer.write(ByteBuffer(string: "id: \(change.serial)\ndata: \(change.json)\n\n"))
                    }
                    await catalog.unsubscribe(id)
                    try await writer.finish(nil)
                } catch {
                    await catalog.unsubscribe(id)
                    throw error
                }
            })
    }
}
