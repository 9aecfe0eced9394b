/// An HTTP failure with a stable code. Statuses (even 500) are not errors:
/// they come back as responses for the caller to classify.
public struct HTTPError: Error, Equatable, CustomStringConvertible, Sendable {
    /// Stable identifiers.
    public enum Code: String, Sendable {
        /// Could not resolve, connect, send or receive, or timed out.
        case network = "http.network"
        /// The TLS handshake or certificate verification failed.
        case tls = "http.tls"
        /// The response body was larger than allowed.
        case tooLarge = "http.too_large"
        /// Too many redirects, or a redirect to a refused scheme.
        case redirect = "http.redirect"
        /// The URL is malformed or its scheme or host is refused.
        case refusedURL = "http.refused_url"
        /// libcurl could not be loaded or set up.
        case unavailable = "http.unavailable"
    }

    /// Which step of a network failure failed, for a diagnosis that must
    /// tell a name that does not resolve from a port that refuses.
    package enum Cause: String, Sendable {
        /// The host's name did not resolve.
        case resolveHost = "dns"
        /// The proxy's name did not resolve.
        case resolveProxy = "proxy_dns"
        /// Nothing accepted the connection (refused, unreachable).
        case connect
        /// The connection or the exchange took too long.
        case timeout
    }

    /// What went wrong.
    public let code: Code
    /// The failed step, when libcurl said which (network failures only).
    package var cause: Cause?
    /// A lower-case explanation; never contains request or response bodies.
    public let reason: String

    /// Creates an error.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// True when trying again later may succeed (network trouble).
    public var isTransient: Bool { code == .network }

    /// The reason, without secrets.
    public var description: String { reason }
}
