public import VaultCrypto

/// A store of named objects that is only trusted to keep bytes: a WebDAV
/// collection or any HTTP server answering GET, PUT and DELETE
/// (`WebDAVObjectStore`), or a folder of an S3 bucket (`S3ObjectStore`)
/// (docs/sync.md). This layer moves bytes and classifies answers; what the
/// bytes mean, and whether they can be believed, is the caller's.
///
/// A kind of store is a type that conforms: it reads, writes (saying what
/// its answers to a conditional write mean) and deletes objects, makes the
/// place they go (`createFolder`) and tells when its settings defeat
/// conditional writes (`conditionalWritesProblem`). Its limits and counters
/// are its `session`'s. A kind over HTTP conforms to `HTTPObjectStore`,
/// which reads and deletes for it once it authenticates a request.
public protocol ObjectStore: AnyObject {
    /// Where the objects are, as the user is shown it (an http(s) URL
    /// ending in `/` for the kinds over HTTP).
    var baseURL: String { get }
    /// The limits and counters of the store's requests.
    var session: ObjectStoreSession { get }
    /// The object, or nil when the store has none by that name.
    func get(_ name: String) throws(ObjectStoreFailure) -> StoreObject?
    /// The current strong validator of an object, or nil when it is absent
    /// or the store gives none.
    func etag(_ name: String) throws(ObjectStoreFailure) -> String?
    /// Writes an object; a refusal of `precondition` is `.preconditionFailed`.
    /// Transient failures are tried `attempts` times (nil: the session's).
    func put(_ name: String, _ bytes: [UInt8], precondition: ObjectPrecondition, attempts: Int?)
        throws(ObjectStoreFailure) -> ObjectWriteResult
    /// Deletes an object; one already gone is fine.
    func delete(_ name: String) throws(ObjectStoreFailure)
    /// Makes sure the place the objects go exists; returns the places it
    /// created, each as the user is told ("the folder URL", "the bucket B
    /// at ENDPOINT"), without credentials.
    func createFolder() throws(ObjectStoreFailure) -> [String]
    /// Why this store, as it is set up, would not honour conditional writes
    /// however it answers the probe (an S3 bucket with versioning), or nil.
    func conditionalWritesProblem() throws(ObjectStoreFailure) -> String?
}

/// An object store over HTTP: it authenticates each request as its kind
/// does (`exchange`), and reads, asks for validators and deletes the same
/// way as every other kind over HTTP.
public protocol HTTPObjectStore: ObjectStore {
    /// Sends one request to `url` with this kind's authentication, tries it
    /// again on network trouble, 5xx, 429 and 423 (`attempts` times, nil:
    /// the session's), and returns any other answer, or one whose status is
    /// in `returning`. `label` names the object in errors.
    func exchange(
        _ method: String, url: String, label: String, body: SecureBytes?, headers: [(name: String, value: String)],
        attempts: Int?, returning: Set<Int>
    ) throws(ObjectStoreFailure) -> HTTPResponse
    /// Why a 404 is not simply an absent object (an S3 bucket that does not
    /// exist), or nil.
    func missingPlace(_ response: HTTPResponse) -> ObjectStoreFailure?
    /// The failure for an answer no store of this kind gives to `method`
    /// on `name`, in the words of its body where the kind knows them.
    func unexpected(_ response: HTTPResponse, _ method: String, _ name: String) -> ObjectStoreFailure
}

/// An object as read, with the validator for a later conditional write.
public struct StoreObject: Sendable {
    /// The body.
    public let bytes: [UInt8]
    /// The strong ETag, when the server sent one.
    public let etag: String?

    /// An object read from a store.
    public init(bytes: [UInt8], etag: String?) {
        self.bytes = bytes
        self.etag = etag
    }
}

/// What a write requires of the current object.
public enum ObjectPrecondition: Equatable, Sendable {
    /// Nothing (an immutable object, or a store without preconditions).
    case none
    /// The object must not exist (`If-None-Match: *`).
    case absent
    /// The object must still be this version (`If-Match`).
    case matches(String)
}

/// The outcome of a conditional write.
public enum ObjectWriteResult: Equatable, Sendable {
    /// Stored.
    case stored
    /// The store refused it: another writer changed the object first (412).
    case preconditionFailed
}

/// A store's failure, without bodies or credentials.
public struct ObjectStoreFailure: Error, Equatable, CustomStringConvertible, Sendable {
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
        /// The address answers, but not as a store of this kind there
        /// does: no TLS from an https address, an S3 answer at a WebDAV
        /// URL, a bucket that does not exist.
        case wrongAddress = "store.wrong_address"
        /// No TLS handshake with an https address: a server there that
        /// speaks plain http, a certificate this machine does not trust, or
        /// something in between (a captive portal) that may go away.
        case handshakeFailed = "store.handshake_failed"
    }

    /// What went wrong.
    public let code: Code
    /// A lower-case explanation.
    public let reason: String
    /// True when the store accepted the request but did not answer in
    /// the time allowed, on every try: a stalled server, or a slow one.
    package var unanswered = false

    /// Creates a failure.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The reason.
    public var description: String { reason }
}

extension ObjectStore {
    /// `StoreObject`, as every kind reads it.
    public typealias Object = StoreObject
    /// `ObjectPrecondition`.
    public typealias Precondition = ObjectPrecondition
    /// `ObjectWriteResult`.
    public typealias WriteResult = ObjectWriteResult
    /// `ObjectStoreFailure`.
    public typealias Failure = ObjectStoreFailure

    /// Attempts per request for transient failures.
    public var maximumAttempts: Int {
        get { session.maximumAttempts }
        set { session.maximumAttempts = newValue }
    }
    /// Largest object accepted.
    public var maximumObjectSize: Int {
        get { session.maximumObjectSize }
        set { session.maximumObjectSize = newValue }
    }
    /// Seconds allowed per request.
    public var timeout: Double {
        get { session.timeout }
        set { session.timeout = newValue }
    }
    /// Requests sent, for measurements.
    public var requestCount: Int { session.requestCount }
    /// Requests the store answered with anything but a 5xx: it is there
    /// and working, even when the answer to another request was lost.
    public var answerCount: Int { session.answerCount }
    /// Body bytes sent, for measurements.
    public var bytesSent: Int { session.bytesSent }
    /// The store's clock (its `Date` field, seconds since 1970) in the
    /// last answer that gave one: compared only with another of its dates.
    public var lastDate: Int64? { session.lastDate }

    /// Refuses a name that is not an object name: short lower-case words,
    /// with nothing to escape and nothing that could leave the folder. Every
    /// kind checks a name before it uses it.
    public static func checkName(_ name: String) throws(ObjectStoreFailure) {
        guard !name.isEmpty, name.utf8.count <= 80,
            name.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7a) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2d })
        else { throw ObjectStoreFailure(.invalid, "invalid object name '\(name)'") }
    }

    /// Writes an object, trying transient failures the session's number of times.
    @discardableResult
    public func put(_ name: String, _ bytes: [UInt8], precondition: ObjectPrecondition = .none)
        throws(ObjectStoreFailure) -> ObjectWriteResult
    {
        try put(name, bytes, precondition: precondition, attempts: nil)
    }

    /// Whether the store honours preconditions: a write under a wrong
    /// `If-Match` must be refused. Uses (and removes) `name`.
    public func honoursPreconditions(probe name: String) throws(ObjectStoreFailure) -> Bool {
        try put(name, Array("probe".utf8))
        let stale = try put(name, Array("probe 2".utf8), precondition: .matches("\"vault-no-such-version\""))
        let again = try put(name, Array("probe 3".utf8), precondition: .absent)
        try delete(name)
        return stale == .preconditionFailed && again == .preconditionFailed
    }
}

extension HTTPObjectStore {
    /// None: a 404 is an absent object.
    public func missingPlace(_ response: HTTPResponse) -> ObjectStoreFailure? { nil }

    /// The status, and nothing of the body.
    public func unexpected(_ response: HTTPResponse, _ method: String, _ name: String) -> ObjectStoreFailure {
        ObjectStoreFailure.unexpected(response.status, method, name)
    }

    /// The object, or nil when the store has none by that name.
    public func get(_ name: String) throws(ObjectStoreFailure) -> StoreObject? {
        let response = try exchange("GET", name)
        switch response.status {
        case 200:
            if let type = response.header("content-type")?.lowercased(), type.hasPrefix("text/html") {
                throw ObjectStoreFailure(
                    .badResponse, "the store answered GET \(name) with an HTML page (a login page or a proxy?)")
            }
            return StoreObject(bytes: response.body.unsafeCopyToArray(), etag: response.strongETag)
        case 404, 410:
            if let missing = missingPlace(response) { throw missing }
            return nil
        default:
            throw unexpected(response, "GET", name)
        }
    }

    /// The current strong ETag of an object (HEAD), or nil when it is
    /// absent or the store gives none. Apache sends no ETag on PUT.
    public func etag(_ name: String) throws(ObjectStoreFailure) -> String? {
        let response = try exchange("HEAD", name)
        switch response.status {
        case 200: return response.strongETag
        case 404, 410:
            if let missing = missingPlace(response) { throw missing }
            return nil
        default: throw unexpected(response, "HEAD", name)
        }
    }

    /// Deletes an object; one already gone is fine.
    public func delete(_ name: String) throws(ObjectStoreFailure) {
        let response = try exchange("DELETE", name)
        switch response.status {
        case 200, 202, 204, 404, 410: return
        default: throw unexpected(response, "DELETE", name)
        }
    }

    /// A request without a body for the object `name`, which is checked first.
    private func exchange(_ method: String, _ name: String) throws(ObjectStoreFailure) -> HTTPResponse {
        try Self.checkName(name)
        return try exchange(
            method, url: baseURL + name, label: name, body: nil, headers: [], attempts: nil, returning: [])
    }

    /// A PUT's headers: the type, and the precondition as `If-None-Match`
    /// or `If-Match`, with the ETag as `ifMatch` writes it for this kind.
    static func writeHeaders(_ precondition: ObjectPrecondition, ifMatch: (String) -> String) -> [(
        name: String, value: String
    )] {
        var headers: [(name: String, value: String)] = [("Content-Type", "application/octet-stream")]
        switch precondition {
        case .none: break
        case .absent: headers.append(("If-None-Match", "*"))
        case .matches(let etag): headers.append(("If-Match", ifMatch(etag)))
        }
        return headers
    }

    /// The body as a secure buffer for a PUT.
    static func secureBody(_ bytes: [UInt8]) throws(ObjectStoreFailure) -> SecureBytes {
        do { return try SecureBytes(copying: bytes) } catch { throw ObjectStoreFailure(.invalid, error.reason) }
    }
}

extension ObjectStoreFailure {
    /// A status no store of ours answers `method` with.
    static func unexpected(_ status: Int, _ method: String, _ name: String) -> ObjectStoreFailure {
        ObjectStoreFailure(.badResponse, "the store answered \(method) \(name) with HTTP \(status)")
    }
}

extension HTTPResponse {
    /// The ETag, unless it is weak.
    var strongETag: String? {
        guard let etag = header("etag"), !etag.hasPrefix("W/") else { return nil }
        return etag
    }
}

/// A request to the store that ran out of time and is about to be tried
/// again (`ObjectStoreSession.onTimeout`).
package struct ObjectStoreWait: Sendable {
    /// The store's folder (or bucket and folder), without credentials.
    package let place: String
    /// The request's method and the object's name (or what it stands for).
    package let method: String
    package let name: String
    /// Seconds the request was given.
    package let seconds: Double
    /// The try about to be made, and how many there are at most.
    package let nextAttempt: Int
    package let attempts: Int

    /// `seconds` as said in a message: `30 s`, `0.5 s`.
    package static func said(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }
}

/// The part of an object store that every kind shares: the limits of a
/// request, the counters, and for kinds over HTTP the retries with their
/// back-off (`send`).
public final class ObjectStoreSession {
    /// Attempts per request for transient failures.
    public var maximumAttempts = 5
    /// Largest object accepted.
    public var maximumObjectSize = 16 << 20
    /// Seconds allowed per request.
    public var timeout: Double = 30
    /// Requests sent, for measurements.
    public private(set) var requestCount = 0
    /// Requests answered with anything but a 5xx.
    public private(set) var answerCount = 0
    /// Body bytes sent, for measurements.
    public private(set) var bytesSent = 0
    /// The store's clock in the last answer that gave one.
    public private(set) var lastDate: Int64?
    /// Told when a request ran out of time and is tried again, before the
    /// wait: a store that accepts and never answers is otherwise silent for
    /// minutes.
    package var onTimeout: ((ObjectStoreWait) -> Void)?
    /// When the tries of every request end, on the monotonic clock
    /// (`ObjectStoreSession.now`): a caller that must answer within a time
    /// of its own (the agent, whose client waits for it) stops trying
    /// before then. Nil: each request has all its tries.
    package var deadline: Double?
    let sleep: (Double) -> Void

    /// A session whose retries wait with `sleep`.
    public init(sleep: @escaping (Double) -> Void = { _ in }) {
        self.sleep = sleep
    }

    /// Counts a request of a kind that does not go through `send`: the
    /// body bytes it sent, and whether the store answered it (a failure of
    /// the store itself is no answer).
    public func count(bytesSent bytes: Int, answered: Bool) {
        requestCount += 1
        bytesSent += bytes
        if answered { answerCount += 1 }
    }

    /// True when no further try fits before the deadline: the longest wait
    /// between tries and a second for the try itself.
    private var outOfTime: Bool { deadline.map { ObjectStoreSession.now() + 6 >= $0 } ?? false }

    /// Seconds on the monotonic clock, for `deadline`.
    package static func now() -> Double { LoopbackListener.now() }

    /// The store's address in a request's `url` for the object `name`: the
    /// folder (or bucket and folder) the object is in.
    static func place(of url: String, name: String) -> String {
        url.hasSuffix("/" + name) ? String(url.dropLast(name.utf8.count)) : url
    }

    /// Sends `prepared`'s request, each attempt made afresh by it, trying
    /// transient failures again; `refusal` says why a 401 or 403 came back.
    func send(
        over transport: any HTTPTransport, _ method: String, label name: String, bodySize: Int, attempts: Int?,
        returning: Set<Int>,
        refusal: (HTTPResponse) -> ObjectStoreFailure, prepared: () -> HTTPRequest
    ) throws(ObjectStoreFailure) -> HTTPResponse {
        let maximumAttempts = attempts ?? self.maximumAttempts
        var attempt = 0
        while true {
            attempt += 1
            var request = prepared()
            let allowed = deadline.map { min(timeout, max(1, $0 - ObjectStoreSession.now())) } ?? timeout
            request.timeout = allowed
            request.connectTimeout = min(10, allowed)
            request.maximumResponseSize = maximumObjectSize
            request.followRedirects = false
            requestCount += 1
            bytesSent += bodySize
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
                if attempt >= maximumAttempts || outOfTime {
                    throw ObjectStoreFailure(
                        .transient,
                        "the store answered \(method) \(name) with HTTP \(response.status) \(attempt) times")
                }
            case .success(let response):
                if (300..<400).contains(response.status) {
                    throw ObjectStoreFailure(
                        .badResponse, "the store redirected \(method) \(name) (HTTP \(response.status)); not followed")
                }
                if response.status == 401 || response.status == 403 { throw refusal(response) }
                return response
            case .failure(let error):
                try tryAgainAfter(
                    error, method: method, name: name, url: request.url, allowed: allowed, attempt: attempt,
                    of: maximumAttempts)
            }
            // Jittered exponential backoff: 0.2 s, 0.4 s, ... at most 5 s.
            let base = min(5.0, 0.2 * Double(1 << min(attempt - 1, 5)))
            sleep(base / 2 + Random.fraction() * base / 2)
        }
    }

    /// Throws what a failed attempt means, or returns when the request is
    /// worth trying again (after saying so, for a store that did not
    /// answer in time).
    private func tryAgainAfter(
        _ error: HTTPError, method: String, name: String, url: String, allowed: Double, attempt: Int,
        of maximumAttempts: Int
    ) throws(ObjectStoreFailure) {
        switch error.code {
        case .tooLarge:
            throw ObjectStoreFailure(
                .badResponse, "the store sent more than \(maximumObjectSize) bytes for \(name)")
        case .refusedURL, .redirect:
            throw ObjectStoreFailure(.invalid, error.reason)
        case .tls:
            // Not tried again now: a plain-http server at the
            // address or its certificate does not change within
            // a request; a portal in between may go by later.
            throw ObjectStoreFailure(
                .handshakeFailed,
                "\(method) \(name): \(error.reason): the store did not complete a TLS handshake; a server "
                    + "that speaks plain http needs an http:// address (allowed on a loopback address "
                    + "only), one that speaks https a certificate this machine trusts, and a network that "
                    + "intercepts https (a captive portal) must be passed first")
        case .network, .unavailable:
            let last = attempt >= maximumAttempts || error.code != .network || outOfTime
            if last && error.cause == .timeout {
                var failure = ObjectStoreFailure(
                    .transient,
                    "the store at \(ObjectStoreSession.place(of: url, name: name)) did not answer "
                        + "\(method) \(name) in \(ObjectStoreWait.said(allowed)) (\(attempt) "
                        + (attempt == 1 ? "try" : "tries") + ")")
                failure.unanswered = true
                throw failure
            }
            if last { throw ObjectStoreFailure(.transient, "\(method) \(name): \(error.reason)") }
            if error.cause == .timeout {
                onTimeout?(
                    ObjectStoreWait(
                        place: ObjectStoreSession.place(of: url, name: name), method: method,
                        name: name, seconds: allowed, nextAttempt: attempt + 1, attempts: maximumAttempts))
            }
        }
    }
}
