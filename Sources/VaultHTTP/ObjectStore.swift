public import VaultCrypto

/// A store of named objects under a base URL that is only trusted to keep
/// bytes: a WebDAV collection, any HTTP server answering GET, PUT and
/// DELETE, or a folder of an S3 bucket (docs/sync.md). This layer moves
/// bytes and classifies answers; what the bytes mean, and whether they can
/// be believed, is the caller's.
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
    /// The bucket and the signature of an S3 store; nil for WebDAV and HTTP.
    let s3: (location: S3Location, signature: AWSSignature)?
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
    /// Requests the store answered with anything but a 5xx: it is there
    /// and working, even when the answer to another request was lost.
    public private(set) var answerCount = 0
    /// Body bytes sent, for measurements.
    public private(set) var bytesSent = 0
    /// The store's clock (its `Date` field, seconds since 1970) in the
    /// last answer that gave one: compared only with another of its dates.
    public private(set) var lastDate: Int64?

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
        s3 = nil
    }

    /// A folder of an S3 bucket, each request signed with AWS Signature
    /// Version 4 by libcurl. `sleep` waits between retries.
    public init(
        s3 location: S3Location, accessKeyID: String, secretAccessKey: SecureBytes, transport: any HTTPTransport,
        sleep: @escaping (Double) -> Void = { _ in }
    ) throws(Failure) {
        guard !accessKeyID.isEmpty, accessKeyID.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != 0x3a }) else {
            throw Failure(.invalid, "the access key id is empty or has characters no access key id has")
        }
        baseURL = location.objectsURL
        authorization = nil
        self.transport = transport
        self.sleep = sleep
        s3 = (
            location,
            AWSSignature(
                region: location.region, service: "s3", accessKeyID: accessKeyID, secretAccessKey: secretAccessKey)
        )
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
    public func put(_ name: String, _ bytes: [UInt8], precondition: Precondition = .none, attempts: Int? = nil)
        throws(Failure) -> WriteResult
    {
        try ObjectStore.check(name)
        var headers: [(name: String, value: String)] = [("Content-Type", "application/octet-stream")]
        switch precondition {
        case .none: break
        case .absent: headers.append(("If-None-Match", "*"))
        // Ceph RGW matches only an ETag sent without its quotes; AWS S3 takes either.
        case .matches(let etag): headers.append(("If-Match", s3 == nil ? etag : ObjectStore.unquoted(etag)))
        }
        let body: SecureBytes
        do { body = try SecureBytes(copying: bytes) } catch { throw Failure(.invalid, error.reason) }
        // RGW may answer the loser of concurrent writes under one If-Match
        // with 500 rather than 412: a lost race, never a success; the
        // caller reads what the store holds, as after any refusal. A 500 to
        // a create (If-None-Match) is tried again like any 5xx: a try after
        // a write that did land is refused with 412.
        let raced: Set<Int> = s3 != nil && precondition != .none && precondition != .absent ? [500] : []
        let response = try exchange(
            "PUT", url: baseURL + name, label: name, body: body, headers: headers, attempts: attempts, returning: raced)
        switch response.status {
        case 200, 201, 204: return .stored
        case 412: return .preconditionFailed
        case 500 where !raced.isEmpty: return .preconditionFailed
        case 404 where s3 != nil:
            throw Failure(
                .invalid,
                "the bucket \(s3!.location.bucket) does not exist (PUT \(name) answered HTTP 404)")
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
        if let s3 { return try createBucket(s3.location) }
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

    // MARK: S3 buckets

    /// Makes sure the bucket exists, else creates it (PUT, with the region
    /// as its location on AWS outside us-east-1). A folder inside a bucket
    /// needs no creating. Returns the bucket's URL when it created it.
    private func createBucket(_ location: S3Location) throws(Failure) -> [String] {
        guard try versioning(location) == .missing else { return [] }
        var body: SecureBytes? = nil
        if location.endpoint.hasSuffix(".amazonaws.com"), location.region != S3Location.defaultRegion {
            let xml =
                "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                + "<LocationConstraint>\(location.region)</LocationConstraint></CreateBucketConfiguration>"
            do { body = try SecureBytes(copying: Array(xml.utf8)) } catch { throw Failure(.invalid, error.reason) }
        }
        let url = location.bucketURL
        let made = try exchange("PUT", url: url, label: "the bucket", body: body, headers: [])
        let code = made.body.withUnsafeBytes { ObjectStore.element("Code", in: String(decoding: $0, as: UTF8.self)) }
        switch (made.status, code) {
        case (200, _): return [URLPolicy.redacted(url)]
        case (409, "BucketAlreadyOwnedByYou"): return []  // created meanwhile, by this user
        case (409, _):
            throw Failure(
                .invalid, "the bucket \(location.bucket) belongs to another account (\(code ?? "HTTP 409"))")
        default: throw unexpected(made.status, "PUT", "the bucket")
        }
    }

    /// What GetBucketVersioning says of a bucket.
    enum Versioning: Equatable {
        case missing
        case neverEnabled
        case status(String)
    }

    /// GetBucketVersioning (with `=`: libcurl 7.88 signs a bare sub-resource
    /// differently from S3); its answer also tells a missing bucket, and,
    /// being a GET, carries the error code of a refusal.
    private func versioning(_ location: S3Location) throws(Failure) -> Versioning {
        let response: HTTPResponse
        do {
            response = try exchange(
                "GET", url: location.bucketURL + "?versioning=", label: "the bucket", body: nil, headers: [])
        } catch {
            throw versioningRefused(error)
        }
        switch response.status {
        case 200:
            let text = response.body.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            return ObjectStore.element("Status", in: text).map(Versioning.status) ?? .neverEnabled
        case 404: return .missing
        default: throw unexpected(response.status, "GET", "the bucket's versioning")
        }
    }

    /// A refusal of GetBucketVersioning names the permission it needs: the
    /// keys may be good for the objects and still lack it.
    private func versioningRefused(_ failure: Failure) -> Failure {
        guard failure.code == .unauthorized else { return failure }
        return Failure(
            .unauthorized,
            "\(failure.reason), asked for the bucket's versioning: the keys need s3:GetBucketVersioning on the "
                + "bucket as well as access to its objects (docs/sync.md, \"S3 stores\")")
    }

    /// The bucket's versioning status: nil when it was never turned on,
    /// else "Enabled" or "Suspended". Nil for other stores.
    public func bucketVersioning() throws(Failure) -> String? {
        guard let s3 else { return nil }
        switch try versioning(s3.location) {
        case .status(let status) where status == "Enabled" || status == "Suspended": return status
        case .status, .missing, .neverEnabled: return nil
        }
    }

    /// The text of the first `<name>` element of an S3 XML answer, when it
    /// is a plain word (S3's error codes and statuses are).
    static func element(_ name: String, in xml: String) -> String? {
        guard let open = xml.firstRange(of: "<\(name)>"),
            let close = xml[open.upperBound...].firstRange(of: "</\(name)>")
        else {
            return nil
        }
        let value = xml[open.upperBound..<close.lowerBound]
        guard !value.isEmpty, value.count <= 64, value.allSatisfy({ $0.isLetter || $0.isNumber }) else { return nil }
        return String(value)
    }

    static func unquoted(_ etag: String) -> String {
        etag.count >= 2 && etag.hasPrefix("\"") && etag.hasSuffix("\"") ? String(etag.dropFirst().dropLast()) : etag
    }

    // MARK: Exchanges

    private func exchange(
        _ method: String, _ name: String, body: SecureBytes?, headers: [(name: String, value: String)]
    ) throws(Failure) -> HTTPResponse {
        try exchange(method, url: baseURL + name, label: name, body: body, headers: headers)
    }

    private func exchange(
        _ method: String, url: String, label name: String, body: SecureBytes?, headers: [(name: String, value: String)],
        attempts: Int? = nil, returning: Set<Int> = []
    ) throws(Failure) -> HTTPResponse {
        let maximumAttempts = attempts ?? self.maximumAttempts
        var all = headers
        if let authorization { all.append(("Authorization", authorization)) }
        if s3 != nil {
            // S3 requires the payload's hash, signed with the request.
            let digest: [UInt8]
            do {
                digest = try SHA256.hash(body?.unsafeCopyToArray() ?? [])
            } catch {
                throw Failure(.invalid, error.reason)
            }
            let hexDigits = Array("0123456789abcdef")
            all.append(
                ("x-amz-content-sha256", String(digest.flatMap { [hexDigits[Int($0 >> 4)], hexDigits[Int($0 & 15)]] })))
        }
        var attempt = 0
        while true {
            attempt += 1
            var request = HTTPRequest(method: method, url: url, headers: all, body: body)
            request.awsSignature = s3?.signature
            request.timeout = timeout
            request.connectTimeout = min(10, timeout)
            request.maximumResponseSize = maximumObjectSize
            request.followRedirects = false
            requestCount += 1
            bytesSent += body?.count ?? 0
            lastDate = nil
            let outcome: Result<HTTPResponse, HTTPError>
            do { outcome = .success(try transport.send(request)) } catch { outcome = .failure(error) }
            if case .success(let response) = outcome {
                if response.status < 500 { answerCount += 1 }
                if let date = response.header("date").flatMap(HTTPDate.seconds) { lastDate = date }
            }
            switch outcome {
            // 423: a WebDAV server that locks an object while a write to it
            // runs (rclone's serve webdav) refuses a second writer for now.
            case .success(let response) where returning.contains(response.status):
                return response
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
                    throw refusal(response)
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
            sleep(base / 2 + Random.fraction() * base / 2)
        }
    }

    /// Why the store refused a request (401, 403), with S3's error code,
    /// which tells a wrong key from a clock too far off.
    private func refusal(_ response: HTTPResponse) -> Failure {
        let text = response.body.withUnsafeBytes { String(decoding: $0.prefix(4096), as: UTF8.self) }
        guard s3 != nil, let code = ObjectStore.element("Code", in: text) else {
            return Failure(.unauthorized, "the store refused the credentials (HTTP \(response.status))")
        }
        if code == "RequestTimeTooSkewed" {
            return Failure(
                .unauthorized,
                "the store refused the request: this machine's clock is more than 15 minutes off the store's "
                    + "(S3 signatures carry the time; set the clock)")
        }
        return Failure(.unauthorized, "the store refused the credentials (HTTP \(response.status) \(code))")
    }

    private func strongETag(_ response: HTTPResponse) -> String? {
        guard let etag = response.header("etag"), !etag.hasPrefix("W/") else { return nil }
        return etag
    }

    private func unexpected(_ status: Int, _ method: String, _ name: String) -> Failure {
        Failure(.badResponse, "the store answered \(method) \(name) with HTTP \(status)")
    }
}
