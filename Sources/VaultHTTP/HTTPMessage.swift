public import VaultCrypto

/// An HTTP request. The body may hold secrets (refresh tokens, client
/// secrets), so it lives in secure memory and is handed to libcurl
/// without a copy. `Sendable`: the body's bytes never change once made.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, `PUT`, ...
    public var method: String
    /// Absolute `https` URL, or `http` to a loopback host.
    public var url: String
    /// Header fields in order.
    public var headers: [(name: String, value: String)]
    /// The body, if any.
    public var body: SecureBytes?
    /// Follow up to `maximumRedirects` redirects (to https only); off by
    /// default, since OAuth endpoints never need them.
    public var followRedirects = false
    /// Redirects followed at most.
    public var maximumRedirects = 3
    /// Seconds allowed to connect.
    public var connectTimeout: Double = 10
    /// Seconds allowed for the whole exchange.
    public var timeout: Double = 30
    /// Largest response body accepted, in bytes.
    public var maximumResponseSize = 1 << 20
    /// Sign the request with AWS Signature Version 4 (libcurl computes
    /// it); the caller sends `x-amz-content-sha256` with the body's hash.
    public var awsSignature: AWSSignature?

    /// Creates a request.
    public init(
        method: String, url: String, headers: [(name: String, value: String)] = [], body: SecureBytes? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// An HTTP response. The body may hold tokens, so it is in secure memory.
/// `Sendable`: the body's bytes never change once made.
public struct HTTPResponse: Sendable {
    /// The status code of the final response.
    public let status: Int
    /// Header fields of the final response, names in lower case.
    public let headers: [(name: String, value: String)]
    /// The body.
    public let body: SecureBytes

    /// Creates a response (transports and test fakes).
    public init(status: Int, headers: [(name: String, value: String)], body: SecureBytes) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of a header field, by case-insensitive name.
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name == lower }?.value
    }
}

/// Sends requests: libcurl in production, fakes in tests.
public protocol HTTPTransport {
    /// Performs one exchange.
    func send(_ request: HTTPRequest) throws(HTTPError) -> HTTPResponse
}
