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

    /// What went wrong.
    public let code: Code
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
