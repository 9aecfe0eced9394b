public import VaultCrypto

/// An object store under an http(s) URL: a WebDAV collection, or any HTTP
/// server answering GET, PUT and DELETE there, with Basic authentication
/// when a user is given. A missing folder is made with WebDAV's MKCOL.
public final class WebDAVObjectStore: HTTPObjectStore {
    /// The base URL, ending in `/`.
    public let baseURL: String
    /// The limits and counters.
    public let session: ObjectStoreSession
    private let transport: any HTTPTransport
    private let authorization: String?

    /// A store at `baseURL` (https, or http to a loopback host), with Basic
    /// authentication when `user` is given. `sleep` waits between retries.
    public init(
        baseURL: String, user: String? = nil, password: SecureBytes? = nil, transport: any HTTPTransport,
        sleep: @escaping (Double) -> Void = { _ in }
    ) throws(ObjectStoreFailure) {
        var base = baseURL
        if !base.hasSuffix("/") { base += "/" }
        do { try URLPolicy.check(base) } catch { throw ObjectStoreFailure(.invalid, error.reason) }
        guard !base.contains("?"), !base.contains("#") else {
            throw ObjectStoreFailure(.invalid, "the store url must not have a query or fragment")
        }
        self.baseURL = base
        self.transport = transport
        session = ObjectStoreSession(sleep: sleep)
        if let user {
            var raw = Array(user.utf8) + [UInt8(ascii: ":")] + (password?.unsafeCopyToArray() ?? [])
            authorization = "Basic " + String(decoding: Base64.encode(raw, .standard), as: UTF8.self)
            secureZero(&raw)
        } else {
            authorization = nil
        }
    }

    /// One request, authenticated as this kind does it, through the session.
    public func exchange(
        _ method: String, url: String, label: String, body: SecureBytes?, headers: [(name: String, value: String)],
        attempts: Int?, returning: Set<Int>
    ) throws(ObjectStoreFailure) -> HTTPResponse {
        var all = headers
        if let authorization { all.append(("Authorization", authorization)) }
        return try session.send(
            over: transport, method, label: label, bodySize: body?.count ?? 0, attempts: attempts, returning: returning,
            refusal: WebDAVObjectStore.refusal,
            prepared: { HTTPRequest(method: method, url: url, headers: all, body: body) })
    }

    /// Writes an object; this kind's answers to a refused precondition are `.preconditionFailed`.
    public func put(_ name: String, _ bytes: [UInt8], precondition: ObjectPrecondition, attempts: Int?)
        throws(ObjectStoreFailure) -> ObjectWriteResult
    {
        try Self.checkName(name)
        let headers = Self.writeHeaders(precondition, ifMatch: { $0 })
        let response = try exchange(
            "PUT", url: baseURL + name, label: name, body: try Self.secureBody(bytes), headers: headers,
            attempts: attempts, returning: [])
        switch response.status {
        case 200, 201, 204: return .stored
        case 412: return .preconditionFailed
        case 404, 409:
            // An S3 store answers a bucket it lacks with its error
            // document (NoSuchBucket): a wrong address, not a folder to make.
            if let s3 = Self.s3Answer(response) { throw s3 }
            throw ObjectStoreFailure(
                .missingFolder,
                "the store has no folder \(URLPolicy.redacted(baseURL)) (PUT \(name) answered HTTP \(response.status))")
        default: throw unexpected(response, "PUT", name)
        }
    }

    /// Why the server refused a request (401, 403). One that answers with
    /// S3's error document is an S3 store given a WebDAV URL.
    static func refusal(_ response: HTTPResponse) -> ObjectStoreFailure {
        s3Answer(response)
            ?? ObjectStoreFailure(.unauthorized, "the store refused the credentials (HTTP \(response.status))")
    }

    /// An answer no WebDAV or HTTP store gives: S3's error document says
    /// the address is an S3 store's.
    public func unexpected(_ response: HTTPResponse, _ method: String, _ name: String) -> ObjectStoreFailure {
        WebDAVObjectStore.s3Answer(response) ?? ObjectStoreFailure.unexpected(response.status, method, name)
    }

    private static func s3Answer(_ response: HTTPResponse) -> ObjectStoreFailure? {
        guard let code = S3ObjectStore.errorCode(response) else { return nil }
        return ObjectStoreFailure(
            .wrongAddress,
            "the store answered HTTP \(response.status) \(code) \(answeredAsS3): a folder of an S3 bucket is "
                + "an s3://BUCKET/FOLDER address, with this server as its endpoint")
    }

    /// The words of a failure that says the address answered as an S3
    /// store does, by which the command line knows to offer the s3:// one.
    package static let answeredAsS3 = "as an S3 store does"

    /// Makes sure the base URL names a folder: when PROPFIND does not find
    /// it, creates it, and missing parents, with WebDAV's MKCOL. Returns the
    /// folders created ("the folder URL", without user info); none when it was there or the server does not do
    /// WebDAV (a plain HTTP store), where a later write tells whether the
    /// folder is missing. Asked before any write, since some servers answer
    /// a PUT into a missing folder with 500 (nginx) rather than 404 or 409.
    /// Neither method is retried: a 5xx here means "not supported".
    public func createFolder() throws(ObjectStoreFailure) -> [String] {
        guard let slash = baseURL.firstIndex(of: "/").flatMap({ baseURL[$0...].dropFirst(2).firstIndex(of: "/") })
        else { return [] }
        let origin = String(baseURL[..<slash])
        let segments = baseURL[slash...].split(separator: "/").map(String.init)
        func status(_ method: String, _ url: String, _ headers: [(name: String, value: String)])
            throws(ObjectStoreFailure) -> Int?
        {
            let response: HTTPResponse
            do {
                response = try exchange(
                    method, url: url, label: "the folder", body: nil, headers: headers, attempts: 1, returning: [])
            } catch {
                // An S3 store refusing the method in its own words is at
                // the wrong address, whether credentials were given or not.
                if error.code == .wrongAddress { throw error }
                // Some stores refuse WebDAV methods they do not offer with
                // 401 or 403 yet take PUT and GET: the probe write that
                // follows decides about the credentials.
                return nil
            }
            // S3 answers WebDAV's methods with its error document
            // (MethodNotAllowed): an S3 store given a WebDAV URL.
            if !(200..<300).contains(response.status), let s3 = Self.s3Answer(response) { throw s3 }
            return response.status
        }
        if let found = try status("PROPFIND", baseURL, [("Depth", "0")]), found == 207 || found == 200 { return [] }
        var created: [String] = []
        // Deepest first; on 409 (a parent is missing) one level up, then
        // back down. At most 16 levels.
        func make(_ depth: Int) throws(ObjectStoreFailure) -> Bool {
            guard depth > 0, segments.count - depth < 16 else { return false }
            let url = origin + "/" + segments.prefix(depth).joined(separator: "/") + "/"
            switch try status("MKCOL", url, []) {
            case 201:
                created.append("the folder " + URLPolicy.redacted(url))
                return true
            case 409:
                guard try make(depth - 1), try status("MKCOL", url, []) == 201 else { return false }
                created.append("the folder " + URLPolicy.redacted(url))
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

    /// None: a WebDAV or HTTP server's answers to the probe tell.
    public func conditionalWritesProblem() throws(ObjectStoreFailure) -> String? { nil }
}
