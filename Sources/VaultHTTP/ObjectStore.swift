public import VaultCrypto

/// A store of named objects under a base URL that is only trusted to keep
/// bytes: a WebDAV collection, or any HTTP server answering GET, PUT and
/// DELETE (docs/sync.md). This layer moves bytes and classifies answers;
/// what the bytes mean, and whether they can be believed, is the caller's.
public final class ObjectStore {
    /// An object as read, with the validator for a later conditional write.
    public struct Object {
        /// The body.
        public let bytes: [UInt8]
        /// The strong ETag, when the server sent one.
        public let etag: String?
    }

    /// What a write requires of the current object.
    public enum Precondition: Equatable, Sendable {
        /// Nothing (an immutable object, or a store without preconditions).
        case none
        /// The object must not exist (`If-None-Match: *`).
        case absent
        /// The object must still be this version (`If-Match`).
        case matches(String)
    }

    /// The outcome of a conditional write.
    public enum WriteResult: Equatable, Sendable {
        /// Stored.
        case stored
        /// The store refused it: another writer changed the object first (412).
        case preconditionFailed
    }

    /// Errors, all without bodies or credentials.
    public struct Failure: Error, Equatable, CustomStringConvertible, Sendable {
        /// Stable identifiers of store failures.
        public enum Code: String, Sendable {
            /// Network trouble, 5xx, 429, 423 (locked by another write) or a
            /// timeout, after the retries.
            case transient = "store.transient"
            /// 401 or 403: the store refused the credentials.
            case unauthorized = "store.unauthorized"
            /// An answer no store of ours gives: another status, a redirect,
            /// an HTML page, an oversized body.
            case badResponse = "store.bad_response"
            /// The URL or an object name is refused.
            case invalid = "store.invalid"
            /// The base URL names no folder (a PUT answered 404 or 409),
            /// and MKCOL did not create it.
            case missingFolder = "store.missing_folder"
        }

        /// What went wrong.
        public let code: Code
        /// A lower-case explanation.
        public let reason: String

        /// Creates a failure.
        public init(_ code: Code, _ reason: String) {
            self.code = code
            self.reason = reason
        }

        /// The reason.
        public var description: String { reason }
    }

    /// The base URL, ending in `/`.
    public let baseURL: String
    let authorization: String?
    let transport: any HTTPTransport
    let sleep: (Double) -> Void
    /// Attempts per request for transient failures.
    public var maximumAttempts = 5
    /// Largest object accepted.
    public var maximumObjectSize = 16 << 20
    /// Seconds allowed per request.
    public var timeout: Double = 30
    /// Requests sent, for measurements.
    public private(set) var requestCount = 0
    /// Body bytes sent, for measurements.
    public private(set) var bytesSent = 0

    /// A store at `baseURL` (https, or http to a loopback host), with Basic
    /// authentication when `user` is given. `sleep` waits between retries.
    public init(
        baseURL: String, user: String? = nil, password: SecureBytes? = nil, transport: any HTTPTransport,
        sleep: @escaping (Double) -> Void = { _ in }
    ) throws(Failure) {
        var base = baseURL
        if !base.hasSuffix("/") { base += "/" }
        do { try URLPolicy.check(base) } catch { throw Failure(.invalid, error.reason) }
        guard !base.contains("?"), !base.contains("#") else {
            throw Failure(.invalid, "the store url must not have a query or fragment")
        }
        self.baseURL = base
        self.transport = transport
        self.sleep = sleep
        if let user {
            var raw = Array(user.utf8) + [UInt8(ascii: ":")] + (password?.unsafeCopyToArray() ?? [])
            authorization = "Basic " + String(decoding: Base64.encode(raw, .standard), as: UTF8.self)
            secureZero(&raw)
        } else {
            authorization = nil
        }
    }

    /// Object names are short lower-case words: nothing to escape, nothing
    /// that could leave the collection.
    static func check(_ name: String) throws(Failure) {
        guard !name.isEmpty, name.utf8.count <= 80,
            name.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2d })
        else { throw Failure(.invalid, "invalid object name '\(name)'") }
    }

    /// The object, or nil when the store has none by that name.
    public func get(_ name: String) throws(Failure) -> Object? {
        try ObjectStore.check(name)
        let response = try exchange("GET", name, body: nil, headers: [])
        switch response.status {
        case 200:
            if let type = response.header("content-type")?.lowercased(), type.hasPrefix("text/html") {
                throw Failure(
                    .badResponse, "the store answered GET \(name) with an HTML page (a login page or a proxy?)")
            }
            return Object(bytes: response.body.unsafeCopyToArray(), etag: strongETag(response))
        case 404, 410:
            return nil
        default:
            throw unexpected(response.status, "GET", name)
        }
    }

    /// The current strong ETag of an object (HEAD), or nil when it is
    /// absent or the store gives none. Apache sends no ETag on PUT.
    public func etag(_ name: String) throws(Failure) -> String? {
        try ObjectStore.check(name)
        let response = try exchange("HEAD", name, body: nil, headers: [])
        switch response.status {
        case 200: return strongETag(response)
        case 404, 410: return nil
        default: throw unexpected(response.status, "HEAD", name)
        }
    }

    /// Writes an object.
    @discardableResult
    public func put(_ name: String, _ bytes: [UInt8], precondition: Precondition = .none) throws(Failure)
        -> WriteResult
    {
        try ObjectStore.check(name)
        var headers: [(name: String, value: String)] = [("Content-Type", "application/octet-stream")]
        switch precondition {
        case .none: break
        case .absent: headers.append(("If-None-Match", "*"))
        case .matches(let etag): headers.append(("If-Match", etag))
        }
        let body: SecureBytes
        do { body = try SecureBytes(copying: bytes) } catch { throw Failure(.invalid, error.reason) }
        let response = try exchange("PUT", name, body: body, headers: headers)
        switch response.status {
        case 200, 201, 204: return .stored
        case 412: return .preconditionFailed
        case 404, 409:
            throw Failure(
                .missingFolder,
                "the store has no folder \(URLPolicy.redacted(baseURL)) (PUT \(name) answered HTTP \(response.status))")
        default: throw unexpected(response.status, "PUT", name)
        }
    }

    /// Deletes an object; one already gone is fine.
    public func delete(_ name: String) throws(Failure) {
        try ObjectStore.check(name)
        let response = try exchange("DELETE", name, body: nil, headers: [])
        switch response.status {
        case 200, 202, 204, 404, 410: return
        default: throw unexpected(response.status, "DELETE", name)
        }
    }

    /// Makes sure the base URL names a folder: when PROPFIND does not find
    /// it, creates it, and missing parents, with WebDAV's MKCOL. Returns the
    /// URLs created (without user info); none when it was there or the server does not do
    /// WebDAV (a plain HTTP store), where a later write tells whether the
    /// folder is missing. Asked before any write, since some servers answer
    /// a PUT into a missing folder with 500 (nginx) rather than 404 or 409.
    /// Neither method is retried: a 5xx here means "not supported".
    public func createFolder() throws(Failure) -> [String] {
        guard let slash = baseURL.firstIndex(of: "/").flatMap({ baseURL[$0...].dropFirst(2).firstIndex(of: "/") })
        else { return [] }
        let origin = String(baseURL[..<slash])
        let segments = baseURL[slash...].split(separator: "/").map(String.init)
        func status(_ method: String, _ url: String, _ headers: [(name: String, value: String)]) throws(Failure)
            -> Int?
        {
            do {
                return try exchange(method, url: url, label: "the folder", body: nil, headers: headers, attempts: 1)
                    .status
            } catch {
                // Some stores refuse WebDAV methods they do not offer with
                // 401 or 403 yet take PUT and GET: the probe write that
                // follows decides about the credentials.
                return nil
            }
        }
        if let found = try status("PROPFIND", baseURL, [("Depth", "0")]), found == 207 || found == 200 { return [] }
        var created: [String] = []
        // Deepest first; on 409 (a parent is missing) one level up, then
        // back down. At most 16 levels.
        func make(_ depth: Int) throws(Failure) -> Bool {
            guard depth > 0, segments.count - depth < 16 else { return false }
            let url = origin + "/" + segments.prefix(depth).joined(separator: "/") + "/"
            switch try status("MKCOL", url, []) {
            case 201:
                created.append(URLPolicy.redacted(url))
                return true
            case 409:
                guard try make(depth - 1), try status("MKCOL", url, []) == 201 else { return false }
                created.append(URLPolicy.redacted(url))
                return true
            case 405:
                return true  // there already
            default:
                return false  // refused or not WebDAV: the probe's PUT tells
            }
        }
        _ = try make(segments.count)
        return created
    }

    /// Whether the store honours preconditions: a write under a wrong
    /// `If-Match` must be refused. Uses (and removes) `name`.
    public func honoursPreconditions(probe name: String) throws(Failure) -> Bool {
        try put(name, Array("probe".utf8))
        let stale = try put(name, Array("probe 2".utf8), precondition: .matches("\"vault-no-such-version\""))
        let again = try put(name, Array("probe 3".utf8), precondition: .absent)
        try delete(name)
        return stale == .preconditionFailed && again == .preconditionFailed
    }

    // MARK: Exchanges

    private func exchange(
        _ method: String, _ name: String, body: SecureBytes?, headers: [(name: String, value: String)]
    ) throws(Failure) -> HTTPResponse {
        try exchange(method, url: baseURL + name, label: name, body: body, headers: headers)
    }

    private func exchange(
        _ method: String, url: String, label name: String, body: SecureBytes?, headers: [(name: String, value: String)],
        attempts: Int? = nil
    ) throws(Failure) -> HTTPResponse {
        let maximumAttempts = attempts ?? self.maximumAttempts
        var all = headers
        if let authorization { all.append(("Authorization", authorization)) }
        var attempt = 0
        while true {
            attempt += 1
            var request = HTTPRequest(method: method, url: url, headers: all, body: body)
            request.timeout = timeout
            request.connectTimeout = min(10, timeout)
            request.maximumResponseSize = maximumObjectSize
            request.followRedirects = false
            requestCount += 1
            bytesSent += body?.count ?? 0
            let outcome: Result<HTTPResponse, HTTPError>
            do { outcome = .success(try transport.send(request)) } catch { outcome = .failure(error) }
            switch outcome {
            // 423: a WebDAV server that locks an object while a write to it
            // runs (rclone's serve webdav) refuses a second writer for now.
            case .success(let response)
            where response.status >= 500 || response.status == 429 || response.status == 423:
                if attempt >= maximumAttempts {
                    throw Failure(
                        .transient,
                        "the store answered \(method) \(name) with HTTP \(response.status) \(attempt) times")
                }
            case .success(let response):
                if (300..<400).contains(response.status) {
                    throw Failure(
                        .badResponse, "the store redirected \(method) \(name) (HTTP \(response.status)); not followed")
                }
                if response.status == 401 || response.status == 403 {
                    throw Failure(
                        .unauthorized, "the store refused the credentials (HTTP \(response.status))")
                }
                return response
            case .failure(let error):
                switch error.code {
                case .tooLarge:
                    throw Failure(.badResponse, "the store sent more than \(maximumObjectSize) bytes for \(name)")
                case .refusedURL, .redirect:
                    throw Failure(.invalid, error.reason)
                case .network, .tls, .unavailable:
                    if attempt >= maximumAttempts || error.code != .network {
                        throw Failure(.transient, "\(method) \(name): \(error.reason)")
                    }
                }
            }
            // Jittered exponential backoff: 0.2 s, 0.4 s, ... at most 5 s.
            let base = min(5.0, 0.2 * Double(1 << min(attempt - 1, 5)))
            sleep(base / 2 + Double.random(in: 0...(base / 2)))
        }
    }

    private func strongETag(_ response: HTTPResponse) -> String? {
        guard let etag = response.header("etag"), !etag.hasPrefix("W/") else { return nil }
        return etag
    }

    private func unexpected(_ status: Int, _ method: String, _ name: String) -> Failure {
        Failure(.badResponse, "the store answered \(method) \(name) with HTTP \(status)")
    }
}
